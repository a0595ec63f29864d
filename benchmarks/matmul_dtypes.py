"""Time float32 against bfloat16 matrix products on this machine's CPU.

Whether `--precision mixed_bfloat16` speeds training up depends on the CPU: with AMX or
AVX512-BF16, bfloat16 products are several times faster; without them they are emulated and
slower. Run this before choosing a precision.

    python benchmarks/matmul_dtypes.py
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f")
    return ", ".join(f"{flag}={'yes' if flag in flags else 'no'}" for flag in wanted)


def milliseconds(size, dtype, repeats=10):
    a = tf.cast(tf.random.normal((size, size)), dtype)
    matmul = tf.function(lambda x: tf.matmul(x, x))
    matmul(a)
    start = time.perf_counter()
    for _ in range(repeats):
        matmul(a).numpy()
    return (time.perf_counter() - start) / repeats * 1000


def main():
    print(f"CPU flags: {cpu_flags()}")
    for size in (1024, 2048):
        f32, bf16 = milliseconds(size, tf.float32), milliseconds(size, tf.bfloat16)
        gflops = 2 * size**3 / 1e9
        print(
            f"{size}x{size} matmul: float32 {f32:.1f} ms ({gflops / f32 * 1000:.0f} GFLOP/s), "
            f"bfloat16 {bf16:.1f} ms ({gflops / bf16 * 1000:.0f} GFLOP/s)"
        )


if __name__ == "__main__":
    main()
