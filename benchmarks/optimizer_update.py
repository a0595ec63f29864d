"""What the optimizer's update costs in a fine-tuning step, and whether XLA makes it cheaper.

The MiniLM classifier's `model.fit` steps (batches of `--batch_size` x `--length` random ids,
traced for any length as `length_batches` feeds them), one model per variant in one process,
timed in turns so the machine's drift falls on all alike:

  fused  bertlayers' AdamW as `create_optimizer` builds it (clipping, weight decay, Adam's
         fused kernel): what the library runs
  xla    the same update (clipping, weight decay, Adam) compiled as one XLA function, which
         fuses its element-wise passes over the 23M weights and their moments
  sgd    plain SGD at rate 0 and no clipping: a lower bound for any update

    python benchmarks/optimizer_update.py --rounds 6

Prints, per variant, the wall and the process CPU milliseconds per step of each round and
their medians. Process CPU time counts both cores' work and moves less with the drift.
"""

import argparse
import time

# bertlayers first: it loads TensorFlow with the settings its users get (oneDNN rewrites on).
import bertlayers  # noqa: F401

# isort: split
import keras
import numpy as np
import tensorflow as tf
from op_profile import classifier, finetune_data

VARIANTS = ("fused", "xla", "sgd")


def optimizer(variant):
    from bertlayers.training.optimization import create_optimizer

    if variant == "sgd":
        return keras.optimizers.SGD(0.0)
    result = create_optimizer(5e-5, 1000, 100, weight_decay=0.01)
    if variant == "xla":
        # Keras applies clipping, weight decay and the update inside `_backend_apply_gradients`
        # (Keras 3.15); the gradients go in as arguments, the variables as captures.
        update = result._backend_apply_gradients

        def compiled(grads, variables):
            return tf.function(lambda *g: update(list(g), variables), jit_compile=True)(*grads)

        result._backend_apply_gradients = compiled
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--length", type=int, default=28)
    parser.add_argument("--steps", type=int, default=8, help="steps per timed epoch")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    data = finetune_data(args.batch_size, args.length, args.steps, any_length=True)
    models = {}
    for variant in args.variants:
        keras.utils.set_random_seed(0)
        model = classifier()
        model.compile(optimizer=optimizer(variant))
        model.fit(data, epochs=1, verbose=0)  # traced (and compiled)
        models[variant] = model
    for model in models.values():
        # Untimed: the first epoch after all models are built ran 2-5x slower, whichever came first.
        model.fit(data, epochs=1, verbose=0)
    wall, cpu = {v: [] for v in models}, {v: [] for v in models}
    for _ in range(args.rounds):
        for variant, model in models.items():
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            model.fit(data, epochs=1, verbose=0)
            wall[variant].append((time.perf_counter() - start_wall) / args.steps * 1000)
            cpu[variant].append((time.process_time() - start_cpu) / args.steps * 1000)
    print(
        f"MiniLM classifier, batch {args.batch_size} x length {args.length} (any-length trace), "
        f"{args.steps} steps x {args.rounds} rounds; ms per step"
    )
    print("| update | wall, each round | wall median | CPU, each round | CPU median |")
    print("|---|---|---|---|---|")
    for variant in models:
        rounds_wall = ", ".join(f"{t:.0f}" for t in wall[variant])
        rounds_cpu = ", ".join(f"{t:.0f}" for t in cpu[variant])
        print(
            f"| {variant} | {rounds_wall} | {np.median(wall[variant]):.0f} | {rounds_cpu} | {np.median(cpu[variant]):.0f} |"
        )


if __name__ == "__main__":
    main()
