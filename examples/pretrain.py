"""Pretrain a BERT-family model with `model.fit`.

With no arguments: a tiny BERT (L2/H128) pretrained for 600 steps on the real Wikipedia
excerpt with the real bert-base-uncased vocabulary (masked LM + next-sentence prediction),
a few minutes on 2 CPU cores. Kill it at any time and run the same command again: it resumes
from its last backup.

    python examples/pretrain.py --output_dir runs/pretrain
    python examples/pretrain.py --recipe albert --output_dir runs/albert
    python examples/pretrain.py --recipe roberta --masking token --output_dir runs/roberta
    python examples/pretrain.py --recipe spanbert --output_dir runs/spanbert
    python examples/pretrain.py --init path/to/hf_folder --recipe roberta --corpus my_domain.txt \\
        --eval_corpus my_heldout.txt --output_dir runs/domain    # continued pretraining
    python examples/pretrain.py --recipe electra --option generator_fraction=0.25 --output_dir runs/electra
    python examples/pretrain.py --strategy mirrored --num_cpu_devices 2 ...
    KERAS_BACKEND=jax KERAS_DISTRIBUTION_JOB_ADDRESSES=10.0.0.1:1234 KERAS_DISTRIBUTION_NUM_PROCESSES=2 \\
        KERAS_DISTRIBUTION_PROCESS_ID=0 python examples/pretrain.py --strategy multi_worker ...  # and ID=1 on the other
    python examples/pretrain.py --input_files data/*.tfrecord ...    # records made for google-research/bert
"""

import argparse
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.families.recipes import get_recipe, recipe_names
from bertlayers.runs.pretraining import PretrainingConfig, chance_loss, run_pretraining
from bertlayers.training.distribute import worker_info
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.options import add_flags, help_of


def _recipes_help():
    lines = ["recipes (--recipe; options with --option name=value):"]
    for name in recipe_names():
        recipe = get_recipe(name)
        lines.append(f"  {name:8s} {recipe.description}")
        lines += [f"           --option {k}={option.describe()}" for k, option in recipe.options.items()]
    return "\n".join(lines)


def _option(text):
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name, value


def parse_args():
    parser = argument_parser(__doc__, epilog=_recipes_help())
    add_flags(parser, PretrainingConfig)  # every field's flag, help and range from the config
    parser.add_argument("--input_files", nargs="+", default=None, help=help_of(PretrainingConfig, "input_files"))
    parser.add_argument(
        "--option",
        dest="options",
        type=_option,
        action="append",
        default=None,
        help=help_of(PretrainingConfig, "options"),
    )
    args = vars(parser.parse_args())
    args["options"] = dict(args["options"]) if args["options"] else None
    try:
        return PretrainingConfig(**args)
    except ValueError as error:
        parser.error(str(error))


def main():
    config = parse_args()
    summary = run_pretraining(config)
    loss = summary["loss_key"]
    print(
        f"\nDone: {summary['steps']} steps. {loss}: {summary['initial_' + loss]:.3f} before training, "
        f"{summary['first_epoch_' + loss]:.3f} over the first epoch, {summary['last_epoch_' + loss]:.3f} over "
        f"the last (a uniform guess over the vocabulary scores {chance_loss(summary['vocabulary_size']):.3f})."
    )
    _, index, is_chief = worker_info()
    if is_chief:
        print(f"Encoder saved to {os.path.join(config.output_dir, 'encoder.keras')}")
    else:
        print(f"Worker {index} done; the chief (worker 0) saves the encoder.")
    for key in sorted(k[len("heldout_after_") :] for k in summary if k.startswith("heldout_after_")):
        print(
            f"{key} on {config.eval_corpus}: {summary['heldout_before_' + key]:.3f} before training, "
            f"{summary['heldout_after_' + key]:.3f} after"
        )
    for key in sorted(k[len("last_epoch_") :] for k in summary if k.startswith("last_epoch_") and not k.endswith(loss)):
        print(
            f"{key}: {summary['first_epoch_' + key]:.3f} over the first epoch, {summary['last_epoch_' + key]:.3f} over the last"
        )


if __name__ == "__main__":
    run_script(main)
