"""A fine-tuning run's settings: the flags every task script takes, the `FinetuningConfig` they
make, and what the run starts from (its encoder's source and tokenizer)."""

import argparse
import dataclasses
import functools
import os
from typing import Optional

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.loading import head_pooling
from bertlayers.convert.model_files import tokenizer_of
from bertlayers.models.logits_model import LogitsModel
from bertlayers.networks.lora import DEFAULT_TARGETS, TARGETS, parse_targets
from bertlayers.runs.pretraining import PRECISIONS
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer
from bertlayers.training.distribute import STRATEGIES
from bertlayers.training.task_fitting import FitSettings
from bertlayers.utils.options import add_flags, check_options, option
from bertlayers.utils.validation import (
    NON_NEGATIVE_FLOAT,
    NON_NEGATIVE_INT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    PROBABILITY,
    Range,
)

__all__ = [
    "FEATURE_BASED_LEARNING_RATE",
    "FinetuningConfig",
    "add_feature_based_arguments",
    "add_finetuning_arguments",
    "add_pooling_argument",
    "check_config",
    "encoder_source",
    "feature_based_options",
    "finetuning_config",
    "fixed_length_config",
    "pooling_for",
    "tokenizer_of_source",
]

# A frozen encoder leaves only a freshly initialized BiLSTM and head to train: ELMo's task
# networks train at Adam's usual rate, far above what fine-tuning a pretrained network takes.
FEATURE_BASED_LEARNING_RATE = 1e-3
DEFAULT_LEARNING_RATE = 5e-5
# Flags made in their own groups: the two ways of batching by length exclude each other; the
# feature-based settings only for the runners whose models take them.
LENGTH_BATCHING = ("group_by_length", "pad_to_sequence_length")
FEATURE_BASED = ("feature_based", "lstm_units")


def _all_but(names):
    return [field.name for field in dataclasses.fields(FinetuningConfig) if field.name not in names]


def add_finetuning_arguments(
    parser: argparse.ArgumentParser,
    sequence_length: int = 128,
    epochs: int = 3,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
) -> argparse.ArgumentParser:
    """The flags every task script takes, made from `FinetuningConfig`'s fields (their help and
    ranges), with the script's own defaults. `--learning_rate` left unset takes `learning_rate`,
    or the feature-based rate with `--feature_based` (`FinetuningConfig.from_args`)."""
    group = parser.add_argument_group("fine-tuning")
    defaults = {"sequence_length": sequence_length, "epochs": epochs, "batch_size": batch_size}
    flags = add_flags(group, FinetuningConfig, defaults, skip=(*LENGTH_BATCHING, *FEATURE_BASED))
    flags[
        "learning_rate"
    ].help = f"peak rate (default {learning_rate}; {FEATURE_BASED_LEARNING_RATE} with --feature_based)"
    batches = group.add_mutually_exclusive_group()
    add_flags(batches, FinetuningConfig, skip=_all_but(LENGTH_BATCHING))
    parser.set_defaults(default_learning_rate=learning_rate)
    return parser


def add_feature_based_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--feature_based` and `--lstm_units`, for the runners whose models take them
    (`SequenceClassifier`, `TokenClassifier`)."""
    group = parser.add_argument_group("feature-based use (ELMo style)")
    add_flags(group, FinetuningConfig, skip=_all_but(FEATURE_BASED))
    return parser


def add_pooling_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--pooling`, for the runners whose heads read one vector a sequence (`SequenceClassifier`
    and the models built on it); "auto" is resolved by `pooling_for`."""
    parser.add_argument(
        "--pooling",
        choices=("auto", *LogitsModel.POOLINGS),
        default="auto",
        help="what the head reads: the "
        "encoder's pooler (BERT's tanh dense on [CLS]), or the mean / first / max of its sequence output; "
        "auto: what the checkpoint was trained with (a sentence-transformers folder's pooling, such as the "
        "default all-MiniLM-L6-v2's mean, whose pooler was never trained), else the pooler",
    )
    return parser


def pooling_for(config: "FinetuningConfig", pooling: str) -> str:
    """`pooling`, or for "auto" what the run's checkpoint was trained with (`head_pooling`; the
    encoder's pooler with `random_init`)."""
    return head_pooling(None if config.random_init else encoder_source(config), pooling)


@dataclasses.dataclass
class FinetuningConfig:
    """A fine-tuning run: where it starts and writes, and how it trains. Every field is typed and
    range-checked when the config is made (a ValueError names the field); the task scripts map
    their flags onto it (`from_args`).
    """

    output_dir: str = option(help="where the model, metrics, history and TensorBoard logs go")
    init: Optional[str] = option(
        None,
        "encoder to start from: a Hugging Face folder, a .keras file, or a pretrain.py output folder "
        "(default: the real all-MiniLM-L6-v2)",
    )
    random_init: bool = option(False, "same architecture, random weights (no pretraining)")
    vocabulary: Optional[str] = option(
        None, "vocab.txt (default: the encoder folder's, else bert-base-uncased's)", flag=False
    )
    overwrite: bool = option(
        False,
        "replace the run already in --output_dir (without it, a folder holding a finished or "
        "interrupted run is refused: runs do not resume)",
    )
    sequence_length: int = option(128, "pieces per example, [CLS] and [SEP]s included", Range(int, 2))
    epochs: int = option(3, "passes over the training examples", POSITIVE_INT)
    batch_size: int = option(32, "examples per step", POSITIVE_INT)
    learning_rate: Optional[float] = option(
        None, f"peak rate (default: the script's; {FEATURE_BASED_LEARNING_RATE} with --feature_based)", POSITIVE_FLOAT
    )
    warmup_proportion: float = option(0.1, "share of the steps with linear warmup", PROBABILITY)
    weight_decay: float = option(0.01, "decoupled weight decay (not on LayerNorm or biases)", NON_NEGATIVE_FLOAT)
    layerwise_decay: Optional[float] = option(
        None, "e.g. 0.9: lower layers learn slower", Range(float, 0, 1, low_open=True)
    )
    freeze_layers: Optional[int] = option(
        None,
        "freeze the embeddings and the encoder's first K layers (0: the embeddings only)",
        NON_NEGATIVE_INT,
        metavar="K",
    )
    lora_rank: Optional[int] = option(
        None,
        "train rank-R LoRA adapters on the encoder's --lora_targets and the head, the encoder's weights frozen; "
        "the adapters are saved alone too (lora_adapter.safetensors), model.keras has them folded in",
        POSITIVE_INT,
        metavar="R",
    )
    lora_alpha: Optional[float] = option(None, "LoRA's scale is alpha / rank (default: the rank)", POSITIVE_FLOAT)
    lora_targets: str = option(
        ",".join(DEFAULT_TARGETS),
        f"the projections LoRA adapts, comma-separated: {', '.join(TARGETS)}, or attention, all",
    )
    precision: str = option("float32", "compute dtype policy (variables stay float32)", choices=PRECISIONS)
    strategy: str = option(
        "default",
        "tf.distribute strategy (under KERAS_BACKEND=jax: mirrored is Keras's data parallelism over this "
        "process's devices, multi_worker over those of the processes Keras's KERAS_DISTRIBUTION_* variables name)",
        choices=STRATEGIES,
    )
    tpu: Optional[str] = option(None, "TPU name or address, for --strategy tpu")
    num_cpu_devices: Optional[int] = option(
        None, "split the CPU into this many logical devices (to try mirrored training)", POSITIVE_INT
    )
    group_by_length: bool = option(
        False,
        "training batches of similar lengths: less padding still, but lower accuracy in the studies of "
        "docs/studies.md ('Length-aware batches: seed studies')",
    )
    pad_to_sequence_length: bool = option(
        False,
        "pad every training batch to --sequence_length instead of cutting it to its longest example: the "
        "same arithmetic, more work (how the fixed-length rows of docs/papers.md were trained)",
    )
    feature_based: bool = option(
        False, "freeze the encoder; train a scalar mix of all its layers, a BiLSTM and the head"
    )
    lstm_units: int = option(256, "width of each BiLSTM direction", POSITIVE_INT)
    keep_best: bool = option(
        True, "where the run validates, keep the weights of the epoch with the lowest validation loss"
    )
    early_stopping: Optional[int] = option(
        None, "where the run validates, stop after this many epochs without a lower validation loss", POSITIVE_INT
    )
    seed: int = option(0, "seed of the head's weights, dropout and the data order", Range(int))
    verbose: int = option(1, "0 silent, 1 progress bar, 2 one line per epoch", Range(int, 0, 2))

    def __post_init__(self):
        if not isinstance(self.output_dir, (str, os.PathLike)) or not str(self.output_dir):
            raise ValueError(f"output_dir must name a folder, got {self.output_dir!r}.")
        self.output_dir = str(self.output_dir)
        if self.learning_rate is None:
            self.learning_rate = FEATURE_BASED_LEARNING_RATE if self.feature_based else DEFAULT_LEARNING_RATE
        check_options(self)
        if self.group_by_length and self.pad_to_sequence_length:
            raise ValueError("group_by_length and pad_to_sequence_length exclude each other.")
        if self.lora_rank is not None:
            parse_targets(self.lora_targets)  # a ValueError naming a target that is not one
            if self.feature_based or self.freeze_layers is not None:
                raise ValueError(
                    "lora_rank freezes the encoder's weights and trains adapters on them; it cannot be combined "
                    "with feature_based or freeze_layers."
                )
        if self.feature_based and self.freeze_layers is not None:
            raise ValueError(
                "feature_based freezes the whole encoder already; freeze_layers cannot be combined with it."
            )

    @classmethod
    def from_args(cls, args):
        """The config of parsed `add_finetuning_arguments` flags (an unset `--learning_rate`
        takes the script's default, or the feature-based one)."""
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
        if values.get("learning_rate") is None:
            values["learning_rate"] = (
                FEATURE_BASED_LEARNING_RATE if values.get("feature_based") else args.default_learning_rate
            )
        return cls(**values)

    @functools.cached_property
    def tokenizer(self) -> ModelTokenizer:
        """The `ModelTokenizer` the run tokenizes with, resolved once: its `vocabulary` (a vocab.txt,
        lower-cased), else the one recorded with (or beside) the encoder it starts from, else
        bert-base-uncased's. Its packer (`tokenizer.packer(length)`) gives the encoder's inputs in
        the checkpoint's own layout."""
        if self.vocabulary:
            return ModelTokenizer.from_vocab_file(self.vocabulary)
        return tokenizer_of_source(encoder_source(self))

    def replaced(self, **changes) -> "FinetuningConfig":
        """A copy with `changes` (a restart's seed and folder), keeping the tokenizer resolved
        already where the changes do not touch what it comes from."""
        copy = dataclasses.replace(self, **changes)
        if "tokenizer" in self.__dict__ and not {"init", "vocabulary"} & set(changes):
            copy.__dict__["tokenizer"] = self.tokenizer
        return copy

    def model_settings(self) -> dict:
        """What a run's model.keras keeps of it for those who load it (`bertlayers.tasks`)."""
        return {"sequence_length": self.sequence_length}

    def fit_settings(self) -> FitSettings:
        """How the run's model trains (`bertlayers.training.task_fitting`)."""
        names = {field.name for field in dataclasses.fields(FitSettings)}
        return FitSettings(**{name: value for name, value in dataclasses.asdict(self).items() if name in names})


def finetuning_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> FinetuningConfig:
    """`FinetuningConfig.from_args(args)`; a bad value ends the script with one line (status 2)."""
    try:
        return FinetuningConfig.from_args(args)
    except ValueError as error:
        parser.error(str(error))


def fixed_length_config(parser: argparse.ArgumentParser, args: argparse.Namespace, why: str) -> FinetuningConfig:
    """`finetuning_config` for a runner whose training batches keep --sequence_length (inputs
    that length batching does not cut, `why`): --group_by_length is refused."""
    if args.group_by_length:
        parser.error(f"--group_by_length: {why}")
    args.pad_to_sequence_length = True
    return finetuning_config(parser, args)


def feature_based_options(config: "FinetuningConfig") -> dict:
    """The model keywords of the feature-based settings."""
    return {"feature_based": config.feature_based, "lstm_units": config.lstm_units}


def encoder_source(config: "FinetuningConfig") -> str:
    """Where a run's encoder comes from: `config.init` (a Hub name: its folder in huggingface_hub's
    cache), else the real all-MiniLM-L6-v2."""
    from bertlayers.utils.assets import minilm_path

    return local_or_hub(config.init) if config.init else minilm_path()


def tokenizer_of_source(source: str) -> ModelTokenizer:
    """The tokenizer recorded with (or beside) the encoder at `source`, else bert-base-uncased's."""
    from bertlayers.utils.assets import bert_uncased_vocabulary

    recorded = tokenizer_of(source)
    return recorded if recorded is not None else ModelTokenizer.from_vocab_file(bert_uncased_vocabulary())


def check_config(config: "FinetuningConfig") -> None:
    """A TypeError unless `config` is a `FinetuningConfig`."""
    if not isinstance(config, FinetuningConfig):
        raise TypeError(
            f"Expected a FinetuningConfig, got a {type(config).__name__} (parsed flags: FinetuningConfig.from_args(args))."
        )
