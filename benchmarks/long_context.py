"""Long context on the CPU: a ModernBERT-base-size encoder (random weights) encodes 1k to 8k tokens,
against the same encoder with full attention in every layer.

Global layers over more than 2,048 tokens compute their scores a chunk of 2,048 queries at a time
(`MultiHeadAttention.query_chunk`), so the peak memory is a chunk's scores, not the whole matrix's.

Each (model, length) runs in a child process of its own, so its peak resident memory is its own:
one untimed call (tracing), then `--repeats` timed calls of `predict` on one sequence. Each child
also times one local (sliding-window) block and one global block alone on that many tokens: the
local block's time grows linearly with the length (it scores a 128-token band, computed band by
band), the global one's quadratically.

    python benchmarks/long_context.py --repeats 3          # the table (about 6 minutes on 2 cores)
    python benchmarks/long_context.py --lengths 1024 2048  # fewer lengths
    python benchmarks/long_context.py --output long_context.json
    python benchmarks/long_context.py --repeats 3 --chart docs/images/long_context.png  # and its chart
"""

import argparse
import json
import logging
import os
import subprocess
import sys
import time

from compare import peak_rss_mb

from bertlayers.utils.machine import cpu_name

logger = logging.getLogger("long_context")
MODELS = ("modernbert", "full_attention")


def child(model_kind, length, repeats, num_layers):
    """Measure one (model, length) in this process; print its JSON result."""
    import keras
    import numpy as np

    from bertlayers.networks.encoder_base import ENCODERS
    from bertlayers.networks.presets import get_preset

    config = get_preset("modernbert_base").replace(max_sequence_length=max(length, 8192))
    if num_layers:
        config = config.replace(num_layers=num_layers, layer_types=config.layer_types[:num_layers])
    if model_kind == "full_attention":  # every layer global: the baseline of the same size
        config = config.replace(layer_types=("full_attention",) * config.num_layers)
    keras.utils.set_random_seed(0)
    encoder = ENCODERS[config.architecture].from_encoder_config(config)
    rng = np.random.default_rng(0)
    inputs = {
        "token_ids": rng.integers(5, config.vocabulary_size, (1, length)).astype("int32"),
        "segment_ids": np.zeros((1, length), "int32"),
        "padding_mask": np.ones((1, length), "int32"),
    }
    model = encoder
    model.predict(inputs, verbose=0)  # traces
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.predict(inputs, verbose=0)
        times.append(time.perf_counter() - start)
    blocks = {}
    hidden = keras.ops.convert_to_tensor(rng.normal(size=(1, length, config.hidden_size)).astype("float32"))
    mask = keras.ops.convert_to_tensor(inputs["padding_mask"])
    for kind, index in (("global", 0), ("local", 1)):
        block = encoder.transformer_layers[index]
        if model_kind == "full_attention" and kind == "local":
            continue
        block(hidden, padding_mask=mask)  # warm
        start = time.perf_counter()
        block(hidden, padding_mask=mask)
        blocks[kind] = time.perf_counter() - start
    peak_mb = peak_rss_mb()
    print(
        json.dumps(
            {
                "model": model_kind,
                "length": length,
                "seconds": float(np.median(times)),
                "peak_mb": peak_mb,
                "block_seconds": blocks,
                "layers": config.num_layers,
                "global_layers": sum(t == "full_attention" for t in config.layer_types),
            }
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=1, help="timed calls per (model, length); the median")
    parser.add_argument("--num_layers", type=int, default=0, help="fewer layers than the preset's 22 (0: all)")
    parser.add_argument("--output", help="also write the results as JSON here")
    parser.add_argument("--chart", help="also draw the results as a PNG here (needs matplotlib)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.repeats, args.num_layers)
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    results = []
    for model_kind in args.models:
        for length in args.lengths:
            command = [sys.executable, os.path.abspath(__file__), "--child", model_kind, str(length)]
            command += ["--repeats", str(args.repeats), "--num_layers", str(args.num_layers)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                logger.info("%s at %d tokens failed:\n%s", model_kind, length, done.stderr[-2000:])
                results.append({"model": model_kind, "length": length, "failed": done.stderr[-300:]})
                continue
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            logger.info("%s", json.dumps(results[-1]))
    table = [
        f"CPU: {cpu_name()}; batch 1, float32, random weights, {results[0].get('layers', '?')} layers.",
        "",
        "| model | tokens | encode (s) | peak RSS (MB) | one local layer (s) | one global layer (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if "failed" in r:
            table.append(f"| {r['model']} | {r['length']} | failed | | | |")
            continue
        blocks = r["block_seconds"]
        local = f"{blocks['local']:.3f}" if "local" in blocks else "-"
        table.append(
            f"| {r['model']} ({r['global_layers']} global) | {r['length']} | {r['seconds']:.2f} | {r['peak_mb']:.0f} "
            f"| {local} | {blocks['global']:.3f} |"
        )
    print("\n".join(table))
    if args.chart:
        chart([r for r in results if "failed" not in r], args.chart)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"cpu": cpu_name(), "results": results}, f, indent=1)


def chart(results, path):
    """Two panels by tokens: the whole encoder's seconds (each model), and one local and one
    global layer's (linear against quadratic)."""
    from bertlayers.utils.charts import pyplot, save_figure

    plt = pyplot()
    if plt is None or not results:
        return
    figure, (whole, layers) = plt.subplots(1, 2, figsize=(10, 3.8))
    for model in dict.fromkeys(r["model"] for r in results):
        rows = [r for r in results if r["model"] == model]
        label = f"{model} ({rows[0]['global_layers']} global layers)"
        whole.plot([r["length"] for r in rows], [r["seconds"] for r in rows], "o-", label=label)
    ours = [r for r in results if "local" in r["block_seconds"]]
    for kind, style in (("local", "o-"), ("global", "s--")):
        layers.plot(
            [r["length"] for r in ours], [r["block_seconds"][kind] for r in ours], style, label=f"one {kind} layer"
        )
    for axis, title in ((whole, "encode one sequence (s)"), (layers, "one layer (s)")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(
            sorted({r["length"] for r in results}), [f"{r // 1024}k" for r in sorted({r["length"] for r in results})]
        )
        axis.set_xlabel("tokens")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    figure.suptitle(f"Long context, batch 1, float32 ({cpu_name()})", fontsize="medium")
    figure.tight_layout()
    save_figure(figure, path)


if __name__ == "__main__":
    main()
