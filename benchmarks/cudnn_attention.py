"""What `jax.nn.dot_product_attention(implementation="cudnn")` takes and gives on the device at
hand, against its XLA form: the padding as a boolean mask (what `keras.ops.dot_product_attention`
passes) and as sequence lengths, and a sliding window as a boolean band and as `local_window_size`.

For each case: whether cuDNN accepts it, the largest difference from the XLA form on the real
query rows (forward, and the gradients with respect to query, key and value), and the median time
of a forward call and of a forward-and-backward call (20 calls queued, one sync; 5 repeats). The
shapes are the works of accelerator.py: the MiniLM fine-tuning batch (32 x 64, 12 heads of 32),
the BERT-base MLM batch (256 x 128, 12 heads of 64) and one ModernBERT-base sequence of 8,192
tokens (12 heads of 64, window 128). Needs JAX on a GPU (on a CPU only the XLA rows run).

    python benchmarks/cudnn_attention.py --output cudnn_attention.json
"""

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

CASES = {
    # name: (batch, length, heads, head size, window or None)
    "finetune_minilm": (32, 64, 12, 32, None),
    "mlm_base": (256, 128, 12, 64, None),
    "long_8192_window": (1, 8192, 12, 64, 128),
    "long_8192_global": (1, 8192, 12, 64, None),
}


def inputs(batch, length, heads, size, seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    q, k, v = (jax.random.normal(key, (batch, length, heads, size), jnp.bfloat16) for key in keys[:3])
    # Right padding: each row's real length between half and all of `length` (one row full).
    lengths = jax.random.randint(keys[3], (batch,), length // 2, length + 1).at[0].set(length).astype(jnp.int32)
    return q, k, v, lengths


def boolean_mask(lengths, length, window):
    """[B, 1, Q, K]: key j real, and within the window of query i where there is one."""
    positions = jnp.arange(length)
    mask = (positions[None, None, None, :] < lengths[:, None, None, None]) & jnp.ones((1, 1, length, 1), bool)
    if window is not None:
        band = jnp.abs(positions[:, None] - positions[None, :]) <= window // 2
        mask = mask & band[None, None]
    return mask


def attention(implementation, form, window):
    def call(q, k, v, lengths):
        scale = 1.0 / np.sqrt(q.shape[-1])
        if form == "mask":
            return jax.nn.dot_product_attention(
                q, k, v, mask=boolean_mask(lengths, q.shape[1], window), scale=scale, implementation=implementation
            )
        return jax.nn.dot_product_attention(
            q,
            k,
            v,
            scale=scale,
            query_seq_lengths=lengths,
            key_value_seq_lengths=lengths,
            local_window_size=None if window is None else (window // 2, window // 2),
            implementation=implementation,
        )

    return call


def timed(function, arguments, repeats=5, calls=20):
    jax.block_until_ready(function(*arguments))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = function(*arguments)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - start) / calls * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}


def real_rows(x, lengths):
    keep = jnp.arange(x.shape[1])[None, :] < lengths[:, None]
    return jnp.where(keep[:, :, None, None], x.astype(jnp.float32), 0.0)


def run_case(name, batch, length, heads, size, window):
    q, k, v, lengths = inputs(batch, length, heads, size)
    results = {}
    outputs = {}
    for implementation in ("xla", "cudnn"):
        for form in ("mask", "lengths"):
            label = f"{implementation}_{form}"
            forward = jax.jit(attention(implementation, form, window))

            def loss(q, k, v, lengths, forward=forward):
                return jnp.sum(real_rows(forward(q, k, v, lengths), lengths) ** 2)

            backward = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
            try:
                out = forward(q, k, v, lengths)
                grads = backward(q, k, v, lengths)
                outputs[label] = (real_rows(out, lengths), grads)
                results[label] = {
                    "forward": timed(forward, (q, k, v, lengths)),
                    "forward_backward": timed(backward, (q, k, v, lengths)),
                }
            except Exception as error:  # cuDNN refuses some forms: record what it says
                results[label] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
            print(name, label, json.dumps(results[label]), flush=True)
    reference = outputs.get("xla_mask")
    for label, (out, grads) in outputs.items():
        if reference is None or label == "xla_mask":
            continue
        results[label]["max_abs_diff_forward"] = float(jnp.max(jnp.abs(out - reference[0])))
        results[label]["max_abs_diff_grads"] = [
            float(jnp.max(jnp.abs(real_rows(g, lengths) - real_rows(r, lengths)))) for g, r in zip(grads, reference[1])
        ]
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", help="write the results (JSON) here, after every case")
    parser.add_argument("--case", nargs="+", choices=CASES, default=list(CASES))
    arguments = parser.parse_args()
    results = {"jax": jax.__version__, "device": str(jax.devices()[0].device_kind), "cases": {}}
    for name in arguments.case:
        results["cases"][name] = run_case(name, *CASES[name])
        if arguments.output:
            with open(arguments.output, "w") as file:
                json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
