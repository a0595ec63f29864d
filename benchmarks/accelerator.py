"""bertlayers on Keras's JAX backend beside keras-hub (JAX) and Hugging Face transformers (eager and
`torch.compile`), on the accelerator work of issue 34's table, in one run on one machine.

Every (library, work) runs in its own process, one after another: peak memory is each run's own.
The table gives medians after warm-up, the ratio of bertlayers to the fastest peer (above 1:
bertlayers is faster), peak device memory (peak RSS where the device is the CPU), and for MLM
pretraining the MFU against a bfloat16 matmul peak measured in the same run. The work, in bfloat16
mixed precision (inference: bfloat16 weights), AdamW for training:

  mlm            BERT-base MLM training step, sequence 128, 20 masked positions, batch 256.
                 transformers' `BertForMaskedLM` computes its loss over every position (its API);
                 the Keras models project only the 20 masked ones.
  finetune       MiniLM-size classifier (L6 H384 A12) training step, sequence 64, batch 32.
  finetune_real  The same classifier over the first 2,048 real Rotten Tomatoes snippets, one pass
                 at batch 32: bertlayers and transformers in batches of like length cut to their
                 longest (rounded up to 16: few compiled shapes), keras-hub at its preprocessor's
                 fixed length 64. Tokenized beforehand (--prepare), for every library alike.
  long_context   A ModernBERT-base-size encoder (22 layers, local attention in two of three) over one
                 8,192-token sequence: inference latency (bfloat16) and a classifier's training step
                 (AdamW); transformers' ModernBERT with flash attention where `flash_attn` is
                 installed, else sdpa (keras-hub has no ModernBERT).
  infer          BERT-base classifier forward, sequence 128: batch-1 latency (p50) and batch-32
                 throughput, NumPy out. Keras models through `bertlayers.models.compiled_predictor`
                 (keras-hub's too: the ratio compares models, not call paths) and, shown beside,
                 Keras's `predict_on_batch`; transformers eager and compiled.

Training throughput is timed over whole `fit` calls (Keras) or step loops ending in a device sync
(torch) after warm-up calls that compile every shape; inputs start on the host each step, as in
training. Weights are random (the same arithmetic as pretrained ones).

It needs JAX and PyTorch (with transformers), not TensorFlow: keras, keras-hub and this repository
on the path (the GPU machines: wheels installed with `pip install --no-index --no-deps --target DIR`
and `PYTHONPATH=DIR`). The real-length inputs come from `--prepare`, run once where bertlayers' data
tools (TensorFlow) run; the file travels with the repository's working tree.

    python benchmarks/accelerator.py --prepare                 # writes benchmarks/accelerator_inputs.npz
    python benchmarks/accelerator.py --output benchmarks/accelerator.json     # the run, on the GPU
    python benchmarks/accelerator.py --quick --torch_python /path/to/torch/venv/bin/python   # CPU smoke run
    python benchmarks/accelerator.py --table benchmarks/accelerator.json       # the table again
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# compare.py's shared pieces import nothing beyond the standard library at module level.
from compare import HERE, MLM_SEQUENCE, REPO, VOCABULARY_SIZE, mlm_flops_per_example, peak_rss_mb
from compare import MLM_PREDICTIONS as MASKED

INPUTS = os.path.join(HERE, "accelerator_inputs.npz")
LIBRARIES = ("bertlayers", "keras_hub", "transformers", "transformers_compile")
WORKS = ("mlm", "finetune", "finetune_real", "infer", "long_context")
LONG_CONTEXT_LIBRARIES = ("bertlayers", "transformers", "transformers_compile")  # keras-hub has no ModernBERT
BASE = dict(num_layers=12, hidden_size=768, num_heads=12, intermediate_size=3072)
MINILM = dict(num_layers=6, hidden_size=384, num_heads=12, intermediate_size=1536)
MODERNBERT_BASE = dict(num_layers=22, hidden_size=768, num_heads=12, intermediate_size=1152)
TINY = dict(num_layers=2, hidden_size=64, num_heads=2, intermediate_size=128)
# Per work: model size, sequence length, batch size, timed steps (the --quick sizes beside).
FULL = {
    "mlm": (BASE, MLM_SEQUENCE, 256, 20),
    "finetune": (MINILM, 64, 32, 50),
    "finetune_real": (MINILM, None, 32, None),
    "infer": (BASE, 128, 32, 50),
    "long_context": (MODERNBERT_BASE, 8192, 1, 10),
}
QUICK = {
    "mlm": (TINY, MLM_SEQUENCE, 8, 4),
    "finetune": (TINY, 64, 8, 4),
    "finetune_real": (TINY, None, 8, None),
    "infer": (TINY, 128, 8, 5),
    "long_context": (TINY, 512, 1, 5),
}
REAL_EXAMPLES, REAL_LENGTH, LENGTH_MULTIPLE = 2048, 64, 16
PASSES = 4  # real-length passes in one timed repeat
TARGET = 1.3  # issue 34: bertlayers at least this much faster than the fastest peer, each work


# --- shared by every worker (numpy only) -----------------------------------------------------


def sizes(work, quick):
    model, sequence, batch, steps = (QUICK if quick else FULL)[work]
    return dict(model), sequence, batch, steps


def random_batch(rng, rows, sequence, masked=0, vocabulary=VOCABULARY_SIZE):
    """Random ids, each row half to wholly real, two segments; with `masked`, that many distinct
    real positions to predict and their target ids."""
    import numpy as np

    lengths = rng.integers(sequence // 2, sequence + 1, rows)
    positions = np.arange(sequence)
    mask = (positions < lengths[:, None]).astype("int32")
    batch = {
        "token_ids": rng.integers(1000, vocabulary, (rows, sequence)).astype("int32") * mask,
        "segment_ids": ((positions >= lengths[:, None] // 2) * mask).astype("int32"),
        "padding_mask": mask,
    }
    if masked:
        batch["masked_positions"] = (rng.random((rows, sequence // 2 - 1)).argsort(-1)[:, :masked] + 1).astype("int32")
        batch["masked_ids"] = rng.integers(1000, vocabulary, (rows, masked)).astype("int32")
    return batch


def real_batches(quick, by_length):
    """The prepared snippets as batches: (token_ids, padding_mask, labels) each.

    by_length: sorted into batches of like length (the order of batches shuffled), each cut to its
    longest rounded up to LENGTH_MULTIPLE; otherwise in file order at the fixed REAL_LENGTH."""
    import numpy as np

    if not os.path.exists(INPUTS):
        raise SystemExit(f"error: {INPUTS} is missing: run `python benchmarks/accelerator.py --prepare` first")
    data = np.load(INPUTS)
    ids, labels = data["token_ids"], data["labels"]
    count = 256 if quick else REAL_EXAMPLES
    ids, labels = ids[:count], labels[:count]
    lengths = (ids != 0).sum(1)
    batch = sizes("finetune_real", quick)[2]
    order = np.argsort(lengths, kind="stable") if by_length else np.arange(len(ids))
    chunks = [order[i : i + batch] for i in range(0, len(order), batch)]
    if by_length:
        chunks = [chunks[i] for i in np.random.default_rng(0).permutation(len(chunks))]
    batches = []
    for rows in chunks:
        width = -(-lengths[rows].max() // LENGTH_MULTIPLE) * LENGTH_MULTIPLE if by_length else REAL_LENGTH
        token_ids = ids[rows, :width]
        batches.append((token_ids, (token_ids != 0).astype("int32"), labels[rows]))
    return batches, int(lengths.sum())


REPEATS = 5  # every timed figure: the median of this many repeats, with their min-max beside it
# Nominal dense bfloat16 peaks (TFLOP/s, without sparsity), from the vendors' data sheets.
NOMINAL_BF16 = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0}


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def median_rate(times, items):
    return items / statistics.median(times)


def rates(times, items):
    """The rates of `items` in each of `times` (seconds) as {median, min, max, n}."""
    return spread([items / t for t in times])


def in_repeats(values, measure):
    """`measure` of each of REPEATS consecutive chunks of `values`, as {median, min, max, n}."""
    size = max(1, len(values) // REPEATS)
    return spread([measure(values[i : i + size]) for i in range(0, size * REPEATS, size) if values[i : i + size]])


def run_facts():
    """The device, driver and library versions of this run (no framework imported: the parent
    process must not take the device's memory from its workers)."""
    from importlib import metadata

    found = {"python": sys.version.split()[0]}
    for name in ("jax", "jaxlib", "keras", "keras-hub", "torch", "transformers", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    try:
        found["gpu"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        found["gpu"] = None
    return found


def nominal_peak(device_name):
    return next((value for name, value in NOMINAL_BF16.items() if name in (device_name or "")), None)


# --- Keras (bertlayers and keras-hub), on the JAX backend -----------------------------------


def keras_device_peak_mb():
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    return stats["peak_bytes_in_use"] / 2**20 if "peak_bytes_in_use" in stats else peak_rss_mb()


def keras_encoder_inputs(keras, names=("token_ids", "segment_ids", "padding_mask")):
    return {name: keras.Input((None,), dtype="int32", name=name) for name in names}


def keras_model(library, work, model_size, sequence):
    """The Keras model for `work`: MLM pretrainer or classifier, from bertlayers or keras-hub."""
    import keras

    if library == "bertlayers":
        from bertlayers.families.bert import BertEncoder
        from bertlayers.models import BertPretrainer, SequenceClassifier

        encoder = BertEncoder(vocabulary_size=VOCABULARY_SIZE, max_sequence_length=512, **model_size)
        if work == "mlm":
            return BertPretrainer(encoder, next_sentence=False)
        return SequenceClassifier(encoder, 2)
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY_SIZE,
        num_layers=model_size["num_layers"],
        num_heads=model_size["num_heads"],
        hidden_dim=model_size["hidden_size"],
        intermediate_dim=model_size["intermediate_size"],
        max_sequence_length=512,
    )
    inputs = keras_encoder_inputs(keras)
    outputs = backbone(inputs)
    if work == "mlm":
        inputs["masked_positions"] = keras.Input((MASKED,), dtype="int32", name="masked_positions")
        head = keras_hub.layers.MaskedLMHead(token_embedding=backbone.token_embedding, intermediate_activation="gelu")
        return keras.Model(inputs, {"mlm": head(outputs["sequence_output"], mask_positions=inputs["masked_positions"])})
    dropped = keras.layers.Dropout(0.1)(outputs["pooled_output"])
    return keras.Model(inputs, {"logits": keras.layers.Dense(2, name="logits")(dropped)})


def keras_worker(library, work, quick):
    import keras
    import numpy as np

    model_size, sequence, batch, steps = sizes(work, quick)
    rng = np.random.default_rng(0)
    keras.config.set_dtype_policy("bfloat16" if work == "infer" else "mixed_bfloat16")
    model = keras_model(library, work, model_size, sequence)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    result = {"device": str(keras.backend.backend()) + ":" + _jax_device()}
    if work == "infer":
        from bertlayers.models import compiled_predictor

        single, full = (random_batch(rng, rows, sequence) for rows in (1, batch))
        # Keras's own call, and bertlayers' compiled predictor (which takes any Keras model: keras-hub's
        # is timed through it too, so the table shows what is Keras's call path and what is the model).
        for path, predict in (("", compiled_predictor(model)), ("predict_on_batch_", model.predict_on_batch)):
            for inputs in (single, full) * 3:
                predict(inputs)  # compile both shapes
            latencies, batch_times = [], []
            for _ in range(steps):
                for inputs, times in ((single, latencies), (full, batch_times)):
                    start = time.perf_counter()
                    predict(inputs)  # returns NumPy: the device has finished
                    times.append(time.perf_counter() - start)
            p50, rate = (
                in_repeats(latencies, statistics.median),
                in_repeats(batch_times, lambda t: batch * len(t) / sum(t)),
            )
            result.update(
                {
                    f"{path}p50_ms": 1000 * p50["median"],
                    f"{path}p50_ms_spread": {k: 1000 * v if k != "n" else v for k, v in p50.items()},
                    f"{path}seq_per_s": rate["median"],
                    f"{path}seq_per_s_spread": rate,
                }
            )
    else:
        if library == "bertlayers":
            from bertlayers.training import create_optimizer

            optimizer = create_optimizer(1e-4, 10_000, 100, weight_decay=0.01)
        else:
            optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, global_clipnorm=1.0)
        model.compile(optimizer=optimizer, loss={"mlm" if work == "mlm" else "logits": loss})
        if work == "finetune_real":
            batches, real_tokens = real_batches(quick, by_length=library == "bertlayers")
            dataset = keras_batches(batches)
            model.fit(dataset, epochs=1, verbose=0)  # compiles every length
            times = []
            for _ in range(REPEATS):  # each repeat PASSES passes: long enough to time (a pass is ~0.3 s on a GPU)
                start = time.perf_counter()
                model.fit(dataset, epochs=PASSES, verbose=0)
                times.append((time.perf_counter() - start) / PASSES)
            examples = sum(len(b[2]) for b in batches)
            result.update(real_results(times, examples, real_tokens))
        else:
            data = random_batch(rng, batch * steps, sequence, masked=MASKED if work == "mlm" else 0)
            targets = (
                {"mlm": data.pop("masked_ids")} if work == "mlm" else {"logits": rng.integers(0, 2, batch * steps)}
            )
            warm = {k: v[: batch * 2] for k, v in data.items()}
            model.fit(warm, {k: v[: batch * 2] for k, v in targets.items()}, batch_size=batch, verbose=0)
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                model.fit(data, targets, batch_size=batch, epochs=1, shuffle=False, verbose=0)
                times.append((time.perf_counter() - start) / steps)
            result.update(seq_per_s=median_rate(times, batch), seq_per_s_spread=rates(times, batch))
    result["peak_memory_mb"] = keras_device_peak_mb()
    return result


def real_results(times, examples, real_tokens):
    """A real-length pass's rates from each repeat's seconds a pass."""
    return {
        "seq_per_s": median_rate(times, examples),
        "seq_per_s_spread": rates(times, examples),
        "real_tokens_per_s": median_rate(times, real_tokens),
    }


def _jax_device():
    import jax

    return jax.devices()[0].platform


def keras_batches(batches):
    """The prepared batches as a `keras.utils.PyDataset` (Keras is imported in the workers only)."""
    import keras

    class Batches(keras.utils.PyDataset):
        def __init__(self):
            super().__init__()

        def __len__(self):
            return len(batches)

        def __getitem__(self, index):
            token_ids, mask, labels = batches[index]
            return {"token_ids": token_ids, "segment_ids": 0 * token_ids, "padding_mask": mask}, {"logits": labels}

    return Batches()


# --- transformers (torch), eager and compiled ------------------------------------------------


def torch_worker(compiled, work, quick):
    import numpy as np
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_size, sequence, batch, steps = sizes(work, quick)
    config = transformers.BertConfig(
        vocab_size=VOCABULARY_SIZE,
        num_hidden_layers=model_size["num_layers"],
        hidden_size=model_size["hidden_size"],
        num_attention_heads=model_size["num_heads"],
        intermediate_size=model_size["intermediate_size"],
        num_labels=2,
        attn_implementation="sdpa",
    )
    cls = transformers.BertForMaskedLM if work == "mlm" else transformers.BertForSequenceClassification
    model = cls(config).to(device)
    rng = np.random.default_rng(0)
    result = {"device": device}
    if work == "infer":
        model = model.to(torch.bfloat16).eval()
        run = torch.compile(model) if compiled else model

        def call(inputs):
            with torch.inference_mode():
                return run(**_torch_inputs(inputs, device)).logits.float().cpu()

        single, full = (random_batch(rng, rows, sequence) for rows in (1, batch))
        for inputs in (single, full) * 3:
            call(inputs)
        latencies, batch_times = [], []
        for _ in range(steps):
            for inputs, times in ((single, latencies), (full, batch_times)):
                start = time.perf_counter()
                call(inputs)
                times.append(time.perf_counter() - start)
        p50, rate = in_repeats(latencies, statistics.median), in_repeats(batch_times, lambda t: batch * len(t) / sum(t))
        result.update(
            p50_ms=1000 * p50["median"],
            p50_ms_spread={k: 1000 * v if k != "n" else v for k, v in p50.items()},
            seq_per_s=rate["median"],
            seq_per_s_spread=rate,
        )
    else:
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=device == "cuda")
        run = torch.compile(model) if compiled else model

        def step(inputs, labels):
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = run(**_torch_inputs(inputs, device), labels=labels.to(device, non_blocking=True)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        def sync():
            if device == "cuda":
                torch.cuda.synchronize()

        if work == "finetune_real":
            batches, real_tokens = real_batches(quick, by_length=True)
            prepared = [
                ({"token_ids": t, "segment_ids": 0 * t, "padding_mask": m}, torch.from_numpy(y).long())
                for t, m, y in batches
            ]
            for inputs, labels in prepared:  # warm-up pass: every length (compiled: every shape)
                step(inputs, labels)
            sync()
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                for _ in range(PASSES):
                    for inputs, labels in prepared:
                        step(inputs, labels)
                sync()
                times.append((time.perf_counter() - start) / PASSES)
            result.update(real_results(times, sum(len(b[2]) for b in batches), real_tokens))
        else:
            data = random_batch(rng, batch, sequence, masked=MASKED if work == "mlm" else 0)
            if work == "mlm":  # -100: not predicted
                labels = np.full((batch, sequence), -100, "int64")
                np.put_along_axis(labels, data.pop("masked_positions"), data.pop("masked_ids"), axis=1)
            else:
                labels = rng.integers(0, 2, batch)
            labels = torch.from_numpy(labels).long()
            for _ in range(3):
                step(data, labels)
            sync()
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                for _ in range(steps):
                    step(data, labels)
                sync()
                times.append((time.perf_counter() - start) / steps)
            result.update(seq_per_s=median_rate(times, batch), seq_per_s_spread=rates(times, batch))
    result["peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else peak_rss_mb()
    return result


def _torch_inputs(inputs, device):
    import torch

    def moved(name):
        return torch.from_numpy(inputs[name]).long().to(device, non_blocking=True)

    return {
        "input_ids": moved("token_ids"),
        "token_type_ids": moved("segment_ids"),
        "attention_mask": moved("padding_mask"),
    }


# --- long context: a ModernBERT-base-size encoder over one 8,192-token sequence --------------


def long_context_sizes(quick):
    """ModernBERT-base (22 layers, H768, local attention over 128 tokens in two layers of three) or,
    quick, TINY with the same alternation; the sequence length, steps."""
    model_size, sequence, _, steps = sizes("long_context", quick)
    return model_size, sequence, steps


def keras_long_context(quick):
    """bertlayers' ModernBERT: inference latency (bfloat16) and a classifier's training step
    (mixed bfloat16, AdamW) on one sequence of the full length."""
    import bertlayers  # noqa: F401 (first, as in every script)

    # isort: split
    import keras
    import numpy as np

    from bertlayers.models import SequenceClassifier, compiled_predictor
    from bertlayers.networks import build_encoder, get_preset
    from bertlayers.training import create_optimizer

    model_size, sequence, steps = long_context_sizes(quick)
    preset = get_preset("modernbert_base")
    layers = model_size["num_layers"]
    config = preset.replace(
        max_sequence_length=sequence,
        layer_types=tuple(preset.layer_types[i % 3] for i in range(layers)),
        **model_size,
    )
    rng = np.random.default_rng(0)
    inputs = {
        "token_ids": rng.integers(5, config.vocabulary_size, (1, sequence)).astype("int32"),
        "segment_ids": np.zeros((1, sequence), "int32"),
        "padding_mask": np.ones((1, sequence), "int32"),
    }
    keras.config.set_dtype_policy("bfloat16")
    predict = compiled_predictor(build_encoder(config))
    for _ in range(2):
        predict(inputs)
    latencies = []
    for _ in range(REPEATS * steps):
        start = time.perf_counter()
        predict(inputs)
        latencies.append(time.perf_counter() - start)
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = SequenceClassifier(build_encoder(config), 2)
    model.compile(
        optimizer=create_optimizer(1e-4, 10_000, 100, weight_decay=0.01),
        loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    data = {k: np.repeat(v, steps, 0) for k, v in inputs.items()}
    targets = {"logits": np.zeros(steps, "int32")}
    model.fit({k: v[:2] for k, v in data.items()}, {"logits": targets["logits"][:2]}, batch_size=1, verbose=0)
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        model.fit(data, targets, batch_size=1, shuffle=False, verbose=0)
        times.append((time.perf_counter() - start) / steps)
    return long_context_result(latencies, times, keras_device_peak_mb(), "jax:" + _jax_device(), "bertlayers")


def long_context_result(latencies, step_times, peak_mb, device, attention):
    p50 = in_repeats(latencies, statistics.median)
    step = spread(step_times)
    return {
        "device": device,
        "attention": attention,
        "p50_ms": 1000 * p50["median"],
        "p50_ms_spread": {k: 1000 * v if k != "n" else v for k, v in p50.items()},
        "train_step_ms": 1000 * step["median"],
        "train_step_ms_spread": {k: 1000 * v if k != "n" else v for k, v in step.items()},
        "peak_memory_mb": peak_mb,
    }


def torch_long_context(compiled, quick):
    """transformers' ModernBERT of the same size: flash attention where `flash_attn` is installed,
    else sdpa; the same two measures."""
    import importlib.util

    import numpy as np
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_size, sequence, steps = long_context_sizes(quick)
    attention = "flash_attention_2" if device == "cuda" and importlib.util.find_spec("flash_attn") else "sdpa"
    config = transformers.ModernBertConfig(
        hidden_size=model_size["hidden_size"],
        num_hidden_layers=model_size["num_layers"],
        num_attention_heads=model_size["num_heads"],
        intermediate_size=model_size["intermediate_size"],
        max_position_embeddings=sequence,
        num_labels=2,
        attn_implementation=attention,
    )
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(5, config.vocab_size, (1, sequence))).long().to(device)
    mask = torch.ones_like(ids)

    def inference_latencies():  # its model freed on return, before the training model is built
        encoder = transformers.ModernBertModel(config).to(device).to(torch.bfloat16).eval()
        run = torch.compile(encoder) if compiled else encoder

        def call():
            with torch.inference_mode():
                return run(input_ids=ids, attention_mask=mask).last_hidden_state.float().cpu()

        for _ in range(2):
            call()
        latencies = []
        for _ in range(REPEATS * steps):
            start = time.perf_counter()
            call()
            latencies.append(time.perf_counter() - start)
        return latencies

    latencies = inference_latencies()
    model = transformers.ModernBertForSequenceClassification(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=device == "cuda")
    step_run = torch.compile(model) if compiled else model
    labels = torch.zeros(1, dtype=torch.long, device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = step_run(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / steps)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else peak_rss_mb()
    return long_context_result(latencies, times, peak, device, attention)


# --- the matmul peak and the driver ----------------------------------------------------------


def matmul_peak(quick):
    """bfloat16 matmul TFLOP/s on JAX's first device: n^3 products of random matrices (ones
    run faster than real data), 30 timed after 3, as the median and the min-max; the device's
    nominal dense bfloat16 peak beside it where the device is known."""
    import jax
    import numpy as np

    n = 1024 if quick else 8192
    rng = np.random.default_rng(0)
    a, b = (jax.device_put(rng.standard_normal((n, n), "float32").astype("bfloat16")) for _ in range(2))
    product = jax.jit(lambda x, y: x @ y)
    for _ in range(3):
        product(a, b).block_until_ready()
    measured = []
    for _ in range(30):
        start = time.perf_counter()
        product(a, b).block_until_ready()
        measured.append(2 * n**3 / (time.perf_counter() - start) / 1e12)
    device = jax.devices()[0]
    name = getattr(device, "device_kind", device.platform)
    found = spread(measured)
    return {"tflops": found["median"], "tflops_spread": found, "device": name, "nominal_tflops": nominal_peak(name)}


def worker(library, work, quick):
    if library == "peak":
        return matmul_peak(quick)
    if work == "long_context":
        if library.startswith("transformers"):
            return torch_long_context(library == "transformers_compile", quick)
        return keras_long_context(quick)
    if library.startswith("transformers"):
        return torch_worker(library == "transformers_compile", work, quick)
    return keras_worker(library, work, quick)


def run_worker(library, work, arguments):
    python = arguments.torch_python if library.startswith("transformers") and arguments.torch_python else sys.executable
    command = [python, os.path.abspath(__file__), "--worker", library, work] + (["--quick"] if arguments.quick else [])
    env = dict(
        os.environ, KERAS_BACKEND="jax", PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    )
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=arguments.timeout)
    except subprocess.TimeoutExpired:  # one row cut short; the run goes on to the next
        print(f"  {library} {work}: timed out after {arguments.timeout} s", flush=True)
        return {"error": f"timed out after {arguments.timeout} s"}
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"  {library} {work}: failed: {' | '.join(tail)}", flush=True)
        return {"error": " | ".join(tail)}
    return json.loads(done.stdout.strip().splitlines()[-1])


def shown(row, key, form):
    """`row[key]` in `form`, with the repeats' min-max where the run recorded them."""
    text = form.format(row[key])
    extent = row.get(f"{key}_spread")
    if extent:
        text += " (" + form.format(extent["min"]) + "-" + form.format(extent["max"]) + ")"
    return text


def table(results):
    peak = results.get("peak", {})
    measured, nominal = peak.get("tflops"), peak.get("nominal_tflops")
    lines = [json.dumps(results["facts"]) if "facts" in results else ""]
    if measured:
        lines.append(
            f"matmul peak (bfloat16, measured in the run): {shown(peak, 'tflops', '{:.3g}')} TFLOP/s on "
            f"{peak['device']}" + (f"; nominal dense bfloat16 peak {nominal:.0f} TFLOP/s" if nominal else "")
        )
    lines += [
        "",
        "| work | library | result: median (min-max of the repeats) | ratio: bertlayers / fastest peer "
        "| peak memory MB | MFU (measured peak / nominal) |",
        "|---|---|---|---|---|---|",
    ]
    for work in WORKS:
        rows = results["works"].get(work, {})
        measures = {"infer": ("p50_ms", "seq_per_s"), "long_context": ("p50_ms", "train_step_ms")}.get(
            work, ("seq_per_s",)
        )
        ratios = []
        for measure in measures:
            ours = rows.get("bertlayers", {}).get(measure)
            peers = [r[measure] for lib, r in rows.items() if lib != "bertlayers" and measure in r]
            if ours and peers:
                ratios.append(min(peers) / ours if measure.endswith("_ms") else ours / max(peers))
        for library in LIBRARIES:
            row = rows.get(library)
            if row is None:
                continue
            if "error" in row:
                lines.append(f"| {work} | {library} | failed: {row['error'][:80]} | | | |")
                continue
            cells = [shown(row, "p50_ms", "{:.2f}") + " ms batch 1"] if "p50_ms" in row else []
            if "seq_per_s" in row:
                cells.append(shown(row, "seq_per_s", "{:,.0f}") + " seq/s")
            if "train_step_ms" in row:
                cells.append(shown(row, "train_step_ms", "{:.1f}") + f" ms a training step ({row['attention']})")
            if "predict_on_batch_p50_ms" in row:
                cells.append(
                    f"(predict_on_batch: {row['predict_on_batch_p50_ms']:.2f} ms, "
                    f"{row['predict_on_batch_seq_per_s']:,.0f} seq/s)"
                )
            if "real_tokens_per_s" in row:
                cells.append(f"{row['real_tokens_per_s']:,.0f} real tokens/s")
            ratio = " / ".join(f"{r:.2f}x" for r in ratios) if library == "bertlayers" and ratios else ""
            mfu = ""
            if work == "mlm" and measured:
                model_size = sizes("mlm", results["quick"])[0]
                flops = row["seq_per_s"] * mlm_flops_per_example(model_size) / 1e12
                mfu = f"{flops / measured:.2f}" + (f" / {flops / nominal:.2f}" if nominal else "")
            lines.append(
                f"| {work} | {library} | {', '.join(cells)} | {ratio} | {row['peak_memory_mb']:,.0f} | {mfu} |"
            )
    return "\n".join(lines)


def merged(paths):
    """Results files of one machine, split across calls, as one: the first file's peak and size."""
    results = None
    for path in paths:
        with open(path) as file:
            part = json.load(file)
        if results is None:
            results = part
            continue
        for work, rows in part["works"].items():
            results["works"].setdefault(work, {}).update(rows)
    return results


def prepare():
    """Tokenize the first snippets with the real bert-base-uncased vocabulary (bertlayers' packer)."""
    import numpy as np

    sys.path.insert(0, REPO)
    from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()[:REAL_EXAMPLES]
    packer = model_tokenizer(bert_uncased_vocabulary()).packer(REAL_LENGTH)
    token_ids = np.asarray(packer([text for text, _ in snippets])["token_ids"], "int32")
    labels = np.array([label == "fresh" for _, label in snippets], "int32")
    np.savez_compressed(INPUTS, token_ids=token_ids, labels=labels)
    print(f"{INPUTS}: {len(labels)} snippets, {int((token_ids != 0).sum())} real tokens at length {REAL_LENGTH}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", nargs="+", choices=WORKS, default=list(WORKS), help="which works to run")
    parser.add_argument("--library", nargs="+", choices=LIBRARIES, default=list(LIBRARIES), help="which libraries")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few steps: a smoke run (CPU)")
    parser.add_argument("--torch_python", help="the Python that has torch and transformers (default: this one)")
    parser.add_argument("--output", help="write the results (JSON) here")
    parser.add_argument(
        "--table",
        metavar="RESULTS",
        nargs="+",
        help="print the table of results files (runs on the same machine, merged) and stop",
    )
    parser.add_argument("--prepare", action="store_true", help=f"write {os.path.relpath(INPUTS, REPO)} and stop")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds one library's run may take")
    parser.add_argument("--worker", nargs=2, metavar=("LIBRARY", "WORK"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        sys.path.insert(0, REPO)
        print(json.dumps(worker(*arguments.worker, arguments.quick)))
        return
    if arguments.prepare:
        return prepare()
    if arguments.table:
        return print(table(merged(arguments.table)))
    results = {"quick": arguments.quick, "facts": run_facts(), "works": {}}
    print("matmul peak ...", flush=True)
    results["peak"] = run_worker("peak", "mlm", arguments)
    for work in arguments.work:
        for library in arguments.library:
            if work == "long_context" and library not in LONG_CONTEXT_LIBRARIES:
                continue
            print(f"{work}: {library} ...", flush=True)
            results["works"].setdefault(work, {})[library] = run_worker(library, work, arguments)
            if arguments.output:  # after every run: a run cut short keeps what it measured
                with open(arguments.output, "w") as file:
                    json.dump(results, file, indent=1)
    print(table(results))


if __name__ == "__main__":
    main()
