"""Load a model or a pretrained encoder from wherever a user keeps one."""

import dataclasses
import json
import logging
import os
import zipfile

import keras
import numpy as np

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES, read_huggingface_folder, vocabulary_read
from bertlayers.convert.model_files import (
    attach_recorded_tokenizer,
    record_tokenizer,
    recorded_tokenizer,
    tokenizer_of,
)
from bertlayers.convert.sentence_transformers import declared_pooling
from bertlayers.convert.weight_map import describe_non_finite
from bertlayers.networks.encoder_base import EncoderBase
from bertlayers.tokenizers.checkpoint_tokenizer import (
    checkpoint_tokenizer,
    folder_of,
    read_config,
    read_tokenizer_files,
)
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer
from bertlayers.utils.validation import not_found

logger = logging.getLogger(__name__)


def load_encoder(
    source: str, dtype: str | keras.DTypePolicy | None = None, tokenizer: ModelTokenizer | None = None
) -> keras.Model:
    """A pretrained encoder from `source`:

    - a Hugging Face folder of any registered model_type (BERT, ELECTRA, XLNet) (config.json + model.safetensors; an
      ELECTRA folder gives its discriminator's or generator's encoder, an XLNet LM head
      folder its encoder),
    - an `encoder.keras` file, or any `.keras` model with an `.encoder` (a pretrainer, a task
      model),
    - an examples/pretrain.py output folder (its `encoder.keras`),
    - a Hugging Face Hub name ("org/name", "hf://org/name", "@revision"): its folder in
      huggingface_hub's cache (`bertlayers.convert.hub`).

    The tokenizer recorded on it is the one recorded with it (or the folder's), or `tokenizer`
    where the caller has resolved it already (a run: its files are then not read again).
    """
    source = local_or_hub(source)
    if os.path.isdir(source):
        config_path = os.path.join(source, "config.json")
        if os.path.isfile(config_path):
            model = _load_folder(source, config_path, dtype)
            encoder = getattr(model, "encoder", model)
            return record_tokenizer(encoder, tokenizer) if tokenizer else _with_folder_tokenizer(encoder, source)
        if os.path.isfile(os.path.join(source, "encoder.keras")):
            return load_encoder(os.path.join(source, "encoder.keras"), dtype=dtype, tokenizer=tokenizer)
        raise FileNotFoundError(f"{source} holds neither a Hugging Face checkpoint (config.json) nor encoder.keras.")
    if not os.path.isfile(source):
        raise not_found(source, "encoder")
    model = load_model_file(source)
    encoder = model if isinstance(model, EncoderBase) else getattr(model, "encoder", None)
    if not isinstance(encoder, EncoderBase):
        raise ValueError(f"{source} holds a {type(model).__name__}, which has no bertlayers encoder.")
    if dtype is not None and keras.dtype_policies.get(dtype).name != encoder.layer_dtype_policy.name:
        rebuilt = type(encoder).from_config({**encoder.get_config(), "dtype": dtype})
        rebuilt.set_weights(encoder.get_weights())
        encoder = rebuilt
    vocabulary = tokenizer or recorded_tokenizer(model)
    return record_tokenizer(encoder, vocabulary) if vocabulary is not None else encoder


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """What a Hugging Face checkpoint folder holds, ready to use.

    Attributes:
      model: the folder's model: a pretrainer with its LM head (`BertPretrainer`,
        `ElectraGenerator`, `XLNetPretrainer`, ...) where the folder has one, else the encoder.
      encoder: its encoder (the tokenizer's files recorded on it, so task models built on it
        save and export with them).
      tokenizer: the folder's `CheckpointTokenizer`: `encode(texts, pairs, sequence_length)`
        gives the model's inputs in the family's layout; `tokenize` and `layout` are the graph
        ops the text SavedModel runs.
    """

    model: object
    encoder: EncoderBase
    tokenizer: CheckpointTokenizer


def load_checkpoint(folder: str, dtype: str | keras.DTypePolicy | None = None) -> Checkpoint:
    """The model, encoder and tokenizer of a Hugging Face checkpoint folder, in one call.

    Args:
      folder: config.json + model.safetensors of any registered model_type (BERT, RoBERTa,
        XLM-R, ALBERT, DistilBERT, ELECTRA, XLNet, ...), and its tokenizer files (vocab.txt;
        vocab.json + merges.txt; spiece.model; sentencepiece.bpe.model); or a Hugging Face Hub
        name ("org/name", "hf://org/name", "@revision"), read from huggingface_hub's cache
        (downloaded there first unless the Hub cannot be reached: `bertlayers.convert.hub`).
      dtype: dtype policy of the model, e.g. "mixed_bfloat16"; weights stay float32.

    Raises:
      FileNotFoundError: a missing weights, config or tokenizer file (named).
      ValueError: an unsupported model_type (the supported ones listed), tokenizer files that do
        not parse or whose vocabulary is not the config's size, weights that do not fit.

    Example (the bundled all-MiniLM-L6-v2, a BERT folder):

    >>> from bertlayers.utils.assets import minilm_path
    >>> checkpoint = load_checkpoint(minilm_path())
    >>> inputs = checkpoint.tokenizer.encode(["A gorgeous, witty movie."], sequence_length=16)
    >>> checkpoint.encoder(inputs)["sequence_output"].shape
    TensorShape([1, 16, 384])
    """
    folder = local_or_hub(folder)
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{folder} has no config.json: not a Hugging Face checkpoint folder.")
    # First, each tokenizer file read once: a folder without them fails before the weights load.
    files = read_tokenizer_files(folder)
    with folder_of(files, read_config(folder), folder) as copy:
        tokenizer = checkpoint_tokenizer(copy)
        recorded = dataclasses.replace(ModelTokenizer.from_folder(copy), source=folder)
    with vocabulary_read(os.path.join(folder, "vocab.txt"), dict(files).get("vocab.txt")):
        model = _load_folder(folder, config_path, dtype)
    encoder = record_tokenizer(getattr(model, "encoder", model), recorded)
    return Checkpoint(model, encoder, tokenizer)


def _with_folder_tokenizer(encoder, folder):
    """`encoder` with the Hugging Face folder's vocabulary recorded on it, where it has one."""
    vocabulary = tokenizer_of(folder)
    return record_tokenizer(encoder, vocabulary) if vocabulary is not None else encoder


def load_model_file(path: str) -> keras.Model:
    """A `.keras` model saved by this library, with errors that say what is wrong with the file,
    and the vocabulary recorded in it (`bertlayers.convert.model_files`) recorded on the model.

    Keras reports a truncated or corrupt archive as "File not found" or a bare zipfile error;
    here each is a ValueError naming the path and what it lacks.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No model file at {path}.")
    if not path.endswith(".keras"):
        raise ValueError(f"{path}: expected a .keras file (saved with model.save) or a checkpoint folder.")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a .keras archive (corrupt or truncated: not a zip file).")
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        missing = sorted({"config.json", "model.weights.h5"} - names)
        if missing:
            raise ValueError(f"{path} is not a complete .keras archive: it lacks {missing}.")
        broken = archive.testzip()
        if broken is not None:
            raise ValueError(f"{path} is corrupt: the archive member {broken} fails its checksum.")
    model = attach_recorded_tokenizer(keras.saving.load_model(path, safe_mode=True), path)
    not_finite = [
        f"{variable.path}: {describe_non_finite(value)}"
        for variable, value in ((v, keras.ops.convert_to_numpy(v)) for v in model.weights)
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all()
    ]
    if not_finite:
        raise ValueError(
            f"{path} holds weights that are not finite (NaN or Inf), which would make every output NaN; "
            f"the file is corrupt or was saved from a diverged run:\n  " + "\n  ".join(not_finite)
        )
    return model


def _load_folder(folder, config_path, dtype):
    """The model of a checkpoint folder, by the loader its model_type registered."""
    family = HUGGINGFACE_FAMILIES.get(_model_type(config_path))
    if family is None:
        # An unreadable config.json or an unknown model_type: the folder's reader names what is wrong.
        read_huggingface_folder(folder, tuple(HUGGINGFACE_FAMILIES))
        raise ValueError(f"{config_path}: no loader for its model_type.")  # the reader raised already
    return family.loader(folder, dtype=dtype)


# sentence-transformers' 1_Pooling/config.json keys, and the pooling each names.
def head_pooling(source: str | None, pooling: str = "auto") -> str:
    """What a task head reads of the encoder at `source`: `pooling` where it is not "auto"; for
    "auto" what the encoder was trained with: the pooling a sentence-transformers folder declares
    (its `1_Pooling/config.json`: "mean", "first" or "max"), the one a fine-tuned model in a
    `.keras` file reads (a classifier's `pooling`), what the family's own sequence classifier in
    transformers reads (a decoder's: "last"), else "pooler" (the encoder's own; also where
    `source` is None: random weights)."""
    if pooling != "auto":
        return pooling
    chosen = "pooler" if source is None else _trained_pooling(local_or_hub(source))
    logger.info(f"Pooling: {chosen} (pooling auto)")
    return chosen


def _trained_pooling(source):
    if os.path.isfile(source) and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:  # the model's config, nothing loaded
            saved = json.loads(archive.read("config.json")) if "config.json" in archive.namelist() else {}
        pooling = saved.get("config", {}).get("pooling") if isinstance(saved, dict) else None
        return pooling if isinstance(pooling, str) else "pooler"
    if not os.path.isdir(source):
        return "pooler"
    config_path = os.path.join(source, "config.json")
    family = HUGGINGFACE_FAMILIES.get(_model_type(config_path) or "") if os.path.isfile(config_path) else None
    return declared_pooling(source) or (family.classifier_pooling if family else "pooler")


def _model_type(config_path):
    try:
        with open(config_path, encoding="utf-8") as f:
            return json.load(f).get("model_type", "bert")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None  # the loader reports what is wrong with the file
