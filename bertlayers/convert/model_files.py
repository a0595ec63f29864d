"""A model file that serves: weights and config (no optimizer state), with the tokenizer the
model was trained with (its `ModelTokenizer`) recorded inside it.

A `.keras` archive holds the model's config and weights; Keras reads only its own members, so
the vocabulary and its lower-casing travel as two more (`bertlayers/vocab.txt`,
`bertlayers/text.json`), or, for a checkpoint with a byte-level BPE or SentencePiece tokenizer,
its tokenizer files (`bertlayers/tokenizer/<name>`, its model_type in `bertlayers/text.json`).
`save_model` writes them, `load_model_file` reads them back, and `export_for_serving` builds
the text SavedModel's tokenizer from them:

    record_tokenizer(model, "vocab.txt", lowercase=True)   # once, for a model you composed
    save_model(model, "model.keras")                        # weights + config + vocabulary
    export_for_serving(load_model_file("model.keras"), "my_model")
"""

import contextlib
import json
import os
import zipfile

import keras

from bertlayers import backend
from bertlayers.convert.hub import local_or_hub
from bertlayers.networks.input_limits import input_limits
from bertlayers.networks.lora import merged_lora
from bertlayers.tokenizers.model_tokenizer import VOCABULARY_FILE, ModelTokenizer, model_tokenizer
from bertlayers.utils import atomic_files

VOCABULARY_MEMBER = "bertlayers/vocab.txt"
TEXT_MEMBER = "bertlayers/text.json"
TOKENIZER_FOLDER = "bertlayers/tokenizer/"
SETTINGS_MEMBER = "bertlayers/settings.json"  # how the model reads text: a task wrapper's sequence length, windows
_ATTRIBUTE = "_bertlayers_vocabulary"  # set with object.__setattr__: Keras does not track it


def record_tokenizer(
    model: keras.Model, vocabulary: ModelTokenizer | str | list, lowercase: bool = True
) -> keras.Model:
    """Record on `model` the tokenizer it was trained with (a `ModelTokenizer`, or a WordPiece
    vocab.txt path or tokens, lower-cased as `lowercase` says), after checking it has one token per
    row of the model's token embedding. `save_model` stores it and `export_for_serving` uses it.
    Returns `model`."""
    tokenizer = model_tokenizer(vocabulary, lowercase)
    tokenizer.in_graph(input_limits(model).vocabulary_size)
    object.__setattr__(model, _ATTRIBUTE, tokenizer)
    return model


def recorded_tokenizer(model: keras.Model) -> ModelTokenizer | None:
    """The `ModelTokenizer` recorded on `model`, else on a layer inside it
    (the encoder a task model or a user's own model was built on), or None."""
    recorded = getattr(model, _ATTRIBUTE, None)
    if recorded is None and isinstance(model, keras.layers.Layer):
        recorded = next(
            (
                getattr(layer, _ATTRIBUTE)
                for layer in backend.flatten_layers(model, include_self=False)
                if getattr(layer, _ATTRIBUTE, None) is not None
            ),
            None,
        )
    return recorded


@contextlib.contextmanager
def optimizer_left_out(model):
    """For the block, `model` saves as never compiled: no optimizer variables, no compile config
    (Keras writes both for a compiled model). Nothing is copied; the model is itself again after."""
    optimizer, compiled = getattr(model, "optimizer", None), getattr(model, "compiled", False)
    if optimizer is None:
        yield model
        return
    model.optimizer, model.compiled = None, False
    try:
        yield model
    finally:
        model.optimizer, model.compiled = optimizer, compiled


def save_model(model: keras.Model, path: str, include_optimizer: bool = False, settings: dict | None = None) -> None:
    """Write `model` to the `.keras` file `path` atomically: config and weights, its recorded
    vocabulary, the text `settings` it was trained with (JSON values: a sequence length; read back
    with `saved_settings`), and the optimizer's state only with `include_optimizer` (a resumable
    backup needs it; serving does not, and for Adam it is twice the weights)."""
    tokenizer = recorded_tokenizer(model)
    members = {SETTINGS_MEMBER: json.dumps(settings)} if settings else {}
    if tokenizer is not None:
        members.update(_archive_members(tokenizer))
    with merged_lora(model):  # a LoRA model's file holds its kernels with the adapters folded in, in float32
        if include_optimizer:
            atomic_files.save_model(model, path, extra_members=members)
            return
        with optimizer_left_out(model):
            atomic_files.save_model(model, path, extra_members=members)


def _archive_members(tokenizer):
    """{member name: content} that store `tokenizer` in a `.keras` archive (`_read_tokenizer` reads them)."""
    if tokenizer.is_wordpiece_vocabulary:
        return {
            VOCABULARY_MEMBER: dict(tokenizer.files)[VOCABULARY_FILE],
            TEXT_MEMBER: json.dumps({"tokenizer": "wordpiece", "lowercase": tokenizer.lowercase}),
        }
    settings = {"tokenizer": "checkpoint", "model_type": tokenizer.model_type}
    if tokenizer.pad_id is not None:
        settings["pad_token_id"] = tokenizer.pad_id
    return {TEXT_MEMBER: json.dumps(settings), **{TOKENIZER_FOLDER + name: data for name, data in tokenizer.files}}


def _read_tokenizer(archive):
    """The `ModelTokenizer` stored in an open `.keras` `zipfile.ZipFile`, or None."""
    names = set(archive.namelist())
    settings = json.loads(archive.read(TEXT_MEMBER)) if TEXT_MEMBER in names else {}
    if settings.get("tokenizer") == "checkpoint":
        files = tuple(
            (name[len(TOKENIZER_FOLDER) :], archive.read(name))
            for name in sorted(names)
            if name.startswith(TOKENIZER_FOLDER)
        )
        return ModelTokenizer(files, settings["model_type"], pad_id=settings.get("pad_token_id"))
    if VOCABULARY_MEMBER not in names:
        return None
    tokens = archive.read(VOCABULARY_MEMBER).decode("utf-8").splitlines()
    return ModelTokenizer.wordpiece(tokens, bool(settings.get("lowercase", True)))


def tokenizer_of(source: str) -> ModelTokenizer | None:
    """The `ModelTokenizer` that goes with a model `source`, or None: the one recorded in a `.keras`
    file; for a folder, a Hugging Face checkpoint's (`ModelTokenizer.from_folder`), or the one
    recorded in its `encoder.keras` (a pretraining run). A Hub name is its cached folder (`hub`)."""
    source = local_or_hub(source)
    if os.path.isfile(source) and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            return _read_tokenizer(archive)
    if not os.path.isdir(source):
        return None
    tokenizer = ModelTokenizer.from_folder(source)
    if tokenizer is not None:
        return tokenizer
    return tokenizer_of(os.path.join(source, "encoder.keras"))


def saved_settings(path: str) -> dict:
    """The settings `save_model` stored in the `.keras` file `path` ({} where it stored none)."""
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(SETTINGS_MEMBER)) if SETTINGS_MEMBER in archive.namelist() else {}


def attach_recorded_tokenizer(model, path):
    """Record on `model` (loaded from the `.keras` file `path`) the vocabulary recorded in that file."""
    vocabulary = tokenizer_of(path)
    if vocabulary is not None:
        object.__setattr__(model, _ATTRIBUTE, vocabulary)
    return model


__all__ = [
    "ModelTokenizer",
    "record_tokenizer",
    "recorded_tokenizer",
    "optimizer_left_out",
    "save_model",
    "saved_settings",
    "tokenizer_of",
]
