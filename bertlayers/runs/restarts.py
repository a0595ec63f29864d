"""Several fine-tunings of one run: BERT's random restarts (the best on a dev set kept) and
ensembles (every member kept, answering as one model)."""

import argparse
import logging
import os
from collections.abc import Callable

import keras

from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model
from bertlayers.runs.finetuning import finetune
from bertlayers.runs.finetuning_config import FinetuningConfig
from bertlayers.startup import require_tensorflow
from bertlayers.utils.validation import POSITIVE_INT, flag

__all__ = [
    "add_ensemble_argument",
    "add_restart_arguments",
    "check_restart_arguments",
    "finetune_restarts",
]

tf = require_tensorflow(__name__)

logger = logging.getLogger(__name__)


def add_restart_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--restarts N` and the `--dev_file` that picks among them, for the runners that take them."""
    group = parser.add_argument_group("random restarts (BERT's choice for small data: several seeds, the best on dev)")
    group.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="fine-tune N times, seeds --seed, --seed + 1, ...; keep the model best on --dev_file",
    )
    group.add_argument(
        "--dev_file",
        default=None,
        help="what picks the best restart (never --eval_file, which would then no longer be held out)",
    )
    return parser


def add_ensemble_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--ensemble N`: fine-tune N models (seeds --seed, --seed + 1, ...) and answer with the mean of
    their probabilities (`ClassifierEnsemble`), saved and served as one model."""
    parser.add_argument(
        "--ensemble",
        type=flag(POSITIVE_INT),
        default=1,
        help="fine-tune N models with seeds --seed, --seed + 1, ... and answer (and serve) the mean of their "
        "probabilities",
    )
    return parser


def check_restart_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A run of several restarts names its dev file, and the dev file is not the evaluation file."""
    if args.restarts < 1:
        parser.error(f"--restarts must be at least 1, got {args.restarts}")
    if getattr(args, "ensemble", 1) > 1 and args.restarts > 1:
        parser.error("--ensemble keeps every model and --restarts the best one: give one of them")
    if args.restarts > 1 and not args.dev_file:
        parser.error("--restarts N > 1 keeps the best model on a dev set: give --dev_file")
    if args.dev_file and os.path.abspath(args.dev_file) == os.path.abspath(args.eval_file):
        parser.error("--dev_file is --eval_file: the best restart on it would not be scored on held-out data")


def finetune_restarts(
    strategy: "tf.distribute.Strategy",
    config: "FinetuningConfig",
    build_model: Callable,
    train: tuple,
    dev_score: Callable | None = None,
    restarts: int = 1,
    validation: tuple | None = None,
    ensemble: int = 1,
) -> tuple[keras.Model, dict]:
    """`finetune` `restarts` times with seeds `config.seed`, `config.seed + 1`, ... (head, dropout
    and data order differ), and keep the model whose `dev_score(model)` is highest (BERT's random
    restarts). Restart k writes to `<output_dir>/restart_<k>/`; the best is saved again as
    `<output_dir>/model.keras`. With `ensemble` N > 1 instead: N models so trained (member k in
    `<output_dir>/member_<k>/`), all kept, answering as one `ClassifierEnsemble` (`model.keras`).

    Returns:
      The best model and {"dev_scores": one a restart, "best_restart", "best_seed"}; or the
      ensemble and {"ensemble_seeds": one a member}.
    """
    if ensemble > 1:
        return _finetune_ensemble(strategy, config, build_model, train, validation, ensemble)
    if restarts == 1:
        return finetune(strategy, config, build_model, train, validation), {}
    best, scores = None, []
    for k in range(restarts):
        seed = config.seed + k
        keras.utils.set_random_seed(seed)
        run = config.replaced(seed=seed, output_dir=os.path.join(config.output_dir, f"restart_{k}"))
        model = finetune(strategy, run, build_model, train, validation)
        scores.append(float(dev_score(model)))
        logger.info(f"restart {k} (seed {seed}): dev score {scores[-1]:.4f}")
        if best is None or scores[-1] > max(scores[:-1]):
            best = model
        del model  # only the best stays in memory
    chosen = int(max(range(restarts), key=scores.__getitem__))
    save_model(
        best, os.path.join(config.output_dir, "model.keras"), settings=config.model_settings()
    )  # its vocabulary was recorded by finetune
    return best, {"dev_scores": scores, "best_restart": chosen, "best_seed": config.seed + chosen}


def _finetune_ensemble(strategy, config, build_model, train, validation, size):
    from bertlayers.models.ensemble import ClassifierEnsemble

    members = []
    for k in range(size):
        seed = config.seed + k
        keras.utils.set_random_seed(seed)
        run = config.replaced(seed=seed, output_dir=os.path.join(config.output_dir, f"member_{k}"))
        members.append(finetune(strategy, run, build_model, train, validation))
        logger.info(f"ensemble member {k} (seed {seed}) trained")
    ensemble = ClassifierEnsemble(members)
    record_tokenizer(ensemble, recorded_tokenizer(members[0]))  # what finetune recorded on each member
    save_model(ensemble, os.path.join(config.output_dir, "model.keras"), settings=config.model_settings())
    return ensemble, {"ensemble_seeds": [config.seed + k for k in range(size)]}
