"""Time float32 against bfloat16 matrix products on this machine's CPU, and (with
`--torch_python`) TensorFlow's kernels beside torch's on the same products.

Whether `--precision mixed_bfloat16` speeds training up depends on the CPU: with AMX or
AVX512-BF16, bfloat16 products are several times faster; without them they are emulated and
slower. Run this before choosing a precision.

Two kinds of product: square ones (the CPU's peak), and the MiniLM classifier's feed-forward
network at a served request's or a training batch's row count (`--rows`: 27 is a batch-1
review snippet, 896 a fine-tuning batch of 32 x 28): `[rows, 384] x [384, 1536]`, ReLU,
`x [1536, 384]`, six times in a row, as one compiled function (TensorFlow: `tf.function`,
oneDNN's kernels where TensorFlow's rewrites are on; torch: eager, in inference mode), the
median of 7 repeats of 100 calls. Both libraries use every core the process is given.

And (`--qkv_rows`) what fusing the attention's query, key and value projections would save:
`[rows, 384]` times three `[384, 384]` kernels against one `[384, 1152]` kernel, six layers in a
row in one `tf.function` (each layer's input the sum of the previous one's three), TensorFlow only.

    python benchmarks/matmul_dtypes.py
    python benchmarks/matmul_dtypes.py --torch_python <torch venv>/bin/python --rows 27 128 896
    python benchmarks/matmul_dtypes.py --qkv_rows 27 896

And (`--activations`) the element-wise side of bfloat16 training: each activation's forward and
backward pass on a fine-tuning batch's `[896, 1536]` feed-forward activations, in bfloat16 and
as training runs them (`bertlayers.layers.activations.activate`: through float32, cast up and
back, where `bertlayers.backend.activations_in_float32` says so, as on TensorFlow's CPU), in one
`tf.function`, the median of 7 repeats of 20 calls.

    python benchmarks/matmul_dtypes.py --activations
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from host_overhead import timed  # noqa: E402 (the benchmarks' one timing loop: stdlib and NumPy)

HIDDEN, INTERMEDIATE, LAYERS = 384, 1536, 6
REPEATS, CALLS = 7, 100


def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f")
    return ", ".join(f"{flag}={'yes' if flag in flags else 'no'}" for flag in wanted)


def square_ms(size, dtype, repeats=10):
    import tensorflow as tf

    a = tf.cast(tf.random.normal((size, size)), dtype)
    matmul = tf.function(lambda x: tf.matmul(x, x))
    matmul(a)
    start = time.perf_counter()
    for _ in range(repeats):
        matmul(a).numpy()
    return (time.perf_counter() - start) / repeats * 1000


def median_ms(call):
    """The median over `REPEATS` of the milliseconds a call of `call` takes (`CALLS` calls each)."""
    return timed(call, CALLS, REPEATS)[0] / 1000


def feed_forward_gflops(rows):
    return 2 * 2 * LAYERS * rows * HIDDEN * INTERMEDIATE / 1e9


def tensorflow_chain_ms(rows, dtype_name):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    dtype = tf.as_dtype(dtype_name)
    weights = [
        (
            tf.Variable(tf.cast(rng.normal(size=(HIDDEN, INTERMEDIATE)) * 0.02, dtype)),
            tf.Variable(tf.cast(rng.normal(size=(INTERMEDIATE, HIDDEN)) * 0.02, dtype)),
        )
        for _ in range(LAYERS)
    ]
    x = tf.cast(tf.constant(rng.normal(size=(rows, HIDDEN))), dtype)

    @tf.function
    def chain(x):
        for up, down in weights:
            x = tf.matmul(tf.nn.relu(tf.matmul(x, up)), down)
        return x

    return median_ms(lambda: chain(x).numpy())


def tensorflow_projections_ms(rows, dtype_name, fused):
    """ms a call of six layers' query/key/value projections on `rows` token rows: three products
    with biases each layer, or (`fused`) one product with the three kernels side by side."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    dtype = tf.as_dtype(dtype_name)

    def variable(*shape):
        return tf.Variable(tf.cast(rng.normal(size=shape) * 0.02, dtype))

    if fused:
        layers = [(variable(HIDDEN, 3 * HIDDEN), variable(3 * HIDDEN)) for _ in range(LAYERS)]
    else:
        layers = [[(variable(HIDDEN, HIDDEN), variable(HIDDEN)) for _ in range(3)] for _ in range(LAYERS)]
    x = tf.cast(tf.constant(rng.normal(size=(rows, HIDDEN))), dtype)

    @tf.function
    def chain(x):
        for layer in layers:
            if fused:
                query, key, value = tf.split(tf.matmul(x, layer[0]) + layer[1], 3, axis=-1)
            else:
                query, key, value = (tf.matmul(x, kernel) + bias for kernel, bias in layer)
            x = query + key + value  # the next layer reads all three
        return x

    return median_ms(lambda: chain(x).numpy())


def activation_step_ms(name, through_float32):
    """ms a forward and backward pass of activation `name` takes on `[896, 1536]` bfloat16 values."""
    from bertlayers.layers.activations import activate, get_activation

    # isort: split
    import tensorflow as tf

    fn = get_activation(name)
    if through_float32:  # the library's own training path (float32 where the backend says so)
        fn = lambda x, fn=fn: activate(fn, x, training=True)  # noqa: E731
    x = tf.cast(tf.random.stateless_normal((896, INTERMEDIATE), seed=(0, 0)), tf.bfloat16)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=tf.ones_like(y))

    return timed(lambda: step(x).numpy(), 20, REPEATS)[0] / 1000


def torch_chain_ms(rows, dtype_name):
    import torch

    generator = torch.Generator().manual_seed(0)
    dtype = getattr(torch, dtype_name)
    weights = [
        (
            torch.randn(HIDDEN, INTERMEDIATE, generator=generator).to(dtype) * 0.02,
            torch.randn(INTERMEDIATE, HIDDEN, generator=generator).to(dtype) * 0.02,
        )
        for _ in range(LAYERS)
    ]
    x = torch.randn(rows, HIDDEN, generator=generator).to(dtype)

    def chain():
        with torch.inference_mode():
            y = x
            for up, down in weights:
                y = torch.relu(y @ up) @ down
            return y.float().numpy()

    return median_ms(chain)


def torch_times(python, rows):
    """{(rows, dtype): ms} from `python` (a Python with torch) running this file's torch side."""
    done = subprocess.run(
        [python, os.path.abspath(__file__), "--torch_worker", "--rows", *map(str, rows)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{python} could not time torch's products: {done.stderr.strip().splitlines()[-1:]}")
    return {(row, dtype): ms for row, dtype, ms in json.loads(done.stdout.strip().splitlines()[-1])}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="*", default=[], help="feed-forward products at these row counts")
    parser.add_argument("--qkv_rows", type=int, nargs="*", default=[], help="the attention projections, fused or not")
    parser.add_argument("--activations", action="store_true", help="activations in bfloat16 and through float32")
    parser.add_argument("--torch_python", help="a Python with torch: its kernels on the same products")
    parser.add_argument("--torch_worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dtypes = ("float32", "bfloat16")
    if args.torch_worker:
        print(json.dumps([(rows, dtype, torch_chain_ms(rows, dtype)) for rows in args.rows for dtype in dtypes]))
        return
    import tensorflow as tf

    print(f"CPU flags: {cpu_flags()}")
    for size in (1024, 2048):
        f32, bf16 = square_ms(size, tf.float32), square_ms(size, tf.bfloat16)
        gflops = 2 * size**3 / 1e9
        print(
            f"{size}x{size} matmul: float32 {f32:.1f} ms ({gflops / f32 * 1000:.0f} GFLOP/s), "
            f"bfloat16 {bf16:.1f} ms ({gflops / bf16 * 1000:.0f} GFLOP/s)"
        )
    if args.activations:
        print("\nActivations forward and backward on [896, 1536] bfloat16 values: ms a call")
        print("| activation | bfloat16 | through float32 |")
        print("|---|---|---|")
        for name in ("gelu", "gelu_approximate", "silu", "relu"):
            print(f"| {name} | {activation_step_ms(name, False):.2f} | {activation_step_ms(name, True):.2f} |")
    if args.qkv_rows:
        print(f"\nThe attention's query/key/value projections, {LAYERS} layers: ms a call")
        print("| rows | dtype | three products | one fused product | saved |")
        print("|---|---|---|---|---|")
        for rows in args.qkv_rows:
            for dtype in dtypes:
                three, one = (tensorflow_projections_ms(rows, dtype, fused) for fused in (False, True))
                print(f"| {rows} | {dtype} | {three:.3f} | {one:.3f} | {three - one:.3f} |")
    if not args.rows:
        return
    peer = torch_times(args.torch_python, args.rows) if args.torch_python else {}
    print(f"\nThe feed-forward network's products, {LAYERS} layers: ms a call (GFLOP/s)")
    print("| rows | dtype | TensorFlow | torch | TensorFlow over torch (speed) |")
    print("|---|---|---|---|---|")
    for rows in args.rows:
        gflops = feed_forward_gflops(rows)
        for dtype in dtypes:
            ours = tensorflow_chain_ms(rows, dtype)
            theirs = peer.get((rows, dtype))
            torch_cell = f"{theirs:.2f} ({gflops / theirs * 1000:.0f})" if theirs else "not run"
            ratio = f"{theirs / ours:.2f}x" if theirs else ""
            print(f"| {rows} | {dtype} | {ours:.2f} ({gflops / ours * 1000:.0f}) | {torch_cell} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
