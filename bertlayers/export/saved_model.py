"""Export any model built from the layers as SavedModels in TF Serving's layout.

For a model named NAME, two SavedModels:
  <base>/NAME/<version>/        token ids in (core TensorFlow ops only: loads in any TF Serving)
  <base>/NAME_text/<version>/   strings in, the checkpoint's tokenizer (WordPiece, byte-level BPE, SentencePiece)
                                and its layout in the graph
and <base>/models.config (ModelServerConfig text format) naming every model under <base>.

Each version folder is written beside its final place and renamed into it, so it appears
complete or not at all, and the two models of a pair appear together (`recover_exports`
finishes a pair whose renames a kill interrupted); the weights are stored once (tracking the model itself with
`ExportArchive.track`, or `model.export`, stores them twice in Keras 3.15: keras#23553).
"""

import contextlib
import dataclasses
import logging
import os
import shutil
from typing import Optional

import keras

from bertlayers import backend
from bertlayers.convert.model_files import recorded_tokenizer
from bertlayers.export.precision import PRECISIONS, in_precision
from bertlayers.export.servable import Servable
from bertlayers.export.serving_folder import (
    batch_in_tf_serving,
    check_model_name,
    check_same_endpoint,
    check_serving_base,
    commit_together,
    next_version,
    recover_exports,
    write_models_config,
)
from bertlayers.export.serving_outputs import ModelOutputs, check_servable, default_outputs
from bertlayers.export.signatures import id_signatures, text_signatures
from bertlayers.models.encoder_model import EncoderModel
from bertlayers.networks.encoder_base import EncoderBase
from bertlayers.networks.input_limits import input_limits
from bertlayers.networks.lora import merged_lora
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer, model_tokenizer
from bertlayers.utils import atomic_files
from bertlayers.utils.options import check_options, option, options_with
from bertlayers.utils.saved_module import SavedModule
from bertlayers.utils.validation import POSITIVE_INT, Range

logger = logging.getLogger(__name__)

tf = require_tensorflow(__name__)


@dataclasses.dataclass
class ExportOptions:
    """How a model is served: the settings of `export_for_serving` that belong together, each with
    its help and range (`bertlayers.utils.options`; `examples/export_savedmodel.py`'s flags)."""

    text: bool = option(True, "also write NAME_text (strings in, the tokenizer in the graph)")
    lowercase: Optional[bool] = option(
        None, "lower-case text first (default: as recorded with the vocabulary, else true)", flag=False
    )
    sequence_length: int = option(128, "the longest request, in pieces (at most the model's limit)", Range(int, 2))
    truncate: bool = option(False, "cut over-long requests to sequence_length instead of refusing them")
    version: Optional[int] = option(None, "the version number (default: the next free one)", POSITIVE_INT)
    max_query_length: int = option(64, "SQuAD text model: the longest question, in pieces", POSITIVE_INT)
    max_answer_length: int = option(30, "SQuAD text model: the longest answer, in pieces", POSITIVE_INT)
    label_names: Optional[list] = option(None, "a classifier's label strings, by class id", flag=False)
    precision: str = option(
        "float32",
        "compute in float32, in a bfloat16 copy (library models), or with int8 weights (Keras's quantization)",
        choices=PRECISIONS,
    )
    serving_base: str = option(
        "/models",
        "where the TF Serving container mounts the base folder: models.config names <serving_base>/<name> "
        "(models.local.config the folders on this host)",
    )
    verbose: bool = option(False, "log each SavedModel as it is written", flag=False)

    def __post_init__(self):
        check_options(self)


def export_for_serving(
    model: keras.Model,
    name: str,
    base_dir: str = "savedmodels",
    vocabulary: ModelTokenizer | str | list | None = None,
    outputs: ModelOutputs | None = None,
    options: ExportOptions | None = None,
    **settings,
) -> dict[str, str]:
    """Export `model` as NAME (ids in) and NAME_text (strings in, tokenized in the graph).

    Args:
      model: any Keras model built from the library's layers whose inputs are named from
        `token_ids`, `segment_ids`, `padding_mask` (a subset; `token_ids` at least), and whose
        outputs are a tensor or a dict of tensors with a batch axis: an encoder, a task model, or
        a functional model of your own. A model served through a part of it is exported as that part
        (`EncoderModel.serving_model`): a `MultipleChoice` as its pair scorer (one (context, choice)
        pair a row in, its `score` out), a `DualEncoder` as its `SentenceEmbedder` (text in,
        `embedding` out).
      name: the model's name in TF Serving (letters, digits, `_`, `.`, `-`; a folder under `base_dir`).
      base_dir: the serving folder (TF Serving's layout, with its `models.config`).
      vocabulary: the tokenizer the model was trained with: a `ModelTokenizer` (any format), or a
        WordPiece vocab.txt path or its tokens. Default: the one
        recorded with the model (`bertlayers.convert.record_tokenizer`; the runners and
        `load_encoder` record theirs, and `load_model_file` reads it back).
      outputs: what the served model returns (`bertlayers.export.serving_outputs`): default the
        task's outputs for the library's models and every model output under its name otherwise;
        e.g. `ClassifierOutputs(label_names=...)` serves your own head's logits as a classifier.
      options: an `ExportOptions`; `settings` (its fields by name: `sequence_length=64`,
        `text=False`, `precision="bfloat16"`, ...) change it. `precision="bfloat16"` computes a
        library model in bfloat16 (weights stored in bfloat16, half the size; outputs still float32),
        faster only where the processor has fast bfloat16 products (`benchmarks/compare.py`).
        `precision="int8"` serves a copy whose dense, einsum and embedding layers hold int8
        weights (Keras's `quantize("int8")`; a quarter of the size; the other layers float, named
        in the log); `bertlayers.tasks.precision_check` says how far its answers move.

    Returns:
      {model name: version folder}.

    Raises:
      ValueError: the model has an input TF Serving cannot feed or an output without a batch axis;
        no vocabulary is recorded or given for the text model; the vocabulary does not fit the
        model; `sequence_length` exceeds the model's limit; a setting is out of its range.
      TypeError: a setting `ExportOptions` has no field for.
    """
    options = options_with(ExportOptions, options, settings, "export_for_serving")
    check_model_name(name)
    check_serving_base(base_dir, options.serving_base)
    if vocabulary is None:  # looked up once, on the model given (a part served alone has none of its own)
        vocabulary = recorded_tokenizer(model)
    if isinstance(model, EncoderModel):
        model = model.serving_model()
    outputs = _outputs(model, outputs, options)
    input_names = check_servable(model, outputs.extra_inputs)
    limits = input_limits(model)
    limits.check_sequence_length(options.sequence_length)
    tokenizer = _text_tokenizer(model, vocabulary, options, limits, outputs) if options.text else None
    # One export at a time into a base: versions are numbered, staged, committed and listed in
    # models.config against what the folder holds, and a second writer would race all four.
    # A LoRA model is served with its adapters folded into its kernels (and left as it was after).
    with atomic_files.locked(base_dir, "export into"), merged_lora(model):
        servable = Servable(in_precision(model, options.precision), outputs, input_names, limits)
        real_first = _reads_first_token(model, tokenizer)
        signatures = {name: id_signatures(servable, options.sequence_length, options.truncate, real_first)}
        if tokenizer is None:
            return _write(servable, signatures, {}, base_dir, options)
        signatures[f"{name}_text"] = text_signatures(servable, tokenizer, options.sequence_length, options.truncate)
        return _write(servable, signatures, {f"{name}_text": tokenizer.tokenizer}, base_dir, options)


@dataclasses.dataclass
class EndpointPart:
    """One model an endpoint serves (`export_endpoint`): `model` with its served `outputs` (default:
    the task's), read at its own `sequence_length` (default: the export's) and cutting longer texts
    where `truncate` (default: the export's)."""

    model: keras.Model
    outputs: Optional[ModelOutputs] = None
    sequence_length: Optional[int] = None
    truncate: Optional[bool] = None


class _Endpoint(SavedModule):
    """The servables of an endpoint's parts under one module: their shared encoder's variables are
    one set of variables in the SavedModel."""


def export_endpoint(
    parts: dict[str, "EndpointPart | keras.Model"],
    name: str,
    base_dir: str = "savedmodels",
    vocabulary: ModelTokenizer | str | list | None = None,
    options: ExportOptions | None = None,
    **settings,
) -> dict[str, str]:
    """One text-in SavedModel NAME serving several models over one encoder, one signature each.

    A retrieval service answers dense, sparse and multi-vector requests for the same texts from one
    encoder (BGE-M3's layout): one model in TF Serving, one copy of the encoder's weights, one
    tokenizer in the graph. Each part PART serves the signature PART (`text` in, its outputs out, as
    `export_for_serving`'s text model's `serving_default`) and, for an embedder, PART_embed (`text`,
    `prompt_name`, `dimensions`); `serving_default` is the first part's.
    `TextEmbedder`, `TextSparseEncoder` and `TextMultiVectorEncoder` give their parts
    (`endpoint_parts`), e.g.
    `export_endpoint({**dense.endpoint_parts("dense"), **splade.endpoint_parts("sparse")}, "retrieval")`.

    Args:
      parts: {signature name: `EndpointPart` or model}: lower-case letters, digits and `_`; the models
        share one encoder (the same layer object).
      name, base_dir, vocabulary, options, settings: as `export_for_serving`'s; the endpoint is a
        text model only (`text=True`) and computes in float32.

    Returns:
      {NAME: version folder}.

    Raises:
      ValueError: no part; a part's name is not a signature name; the parts' models hold different
        encoders; a precision other than float32; and what `export_for_serving` refuses.
    """
    options = options_with(ExportOptions, options, settings, "export_endpoint")
    check_model_name(name)
    check_serving_base(base_dir, options.serving_base)
    if not parts:
        raise ValueError("export_endpoint needs at least one part: {signature name: model}.")
    if not options.text or options.precision != "float32":
        raise ValueError(
            f"export_endpoint writes a float32 text model (got text={options.text}, precision={options.precision!r}); "
            "export_for_serving writes each model in another form."
        )
    parts = {key: part if isinstance(part, EndpointPart) else EndpointPart(part) for key, part in parts.items()}
    encoders = {}
    for key, part in parts.items():
        if not (isinstance(key, str) and key and key.replace("_", "a").isalnum() and key == key.lower()):
            raise ValueError(
                f"An endpoint part's name is a signature name (lower-case letters, digits, _): got {key!r}."
            )
        encoders[key] = next((x for x in backend.flatten_layers(part.model) if isinstance(x, EncoderBase)), None)
    first = next(iter(parts))
    for key, encoder in encoders.items():
        if encoder is None or encoder is not encoders[first]:
            raise ValueError(
                f"export_endpoint serves the models of one encoder: part {key!r} "
                + ("has no encoder of the library's" if encoder is None else f"holds another encoder than {first!r}")
                + ". Build the parts' models over one encoder, or export each with export_for_serving."
            )
    if vocabulary is None:
        vocabulary = next((t for t in (recorded_tokenizer(p.model) for p in parts.values()) if t is not None), None)
    with contextlib.ExitStack() as stack:
        stack.enter_context(atomic_files.locked(base_dir, "export into"))
        endpoint, signatures, tokenizer = _Endpoint(), {}, None
        for key, part in parts.items():
            stack.enter_context(merged_lora(part.model))
            model = part.model.serving_model() if isinstance(part.model, EncoderModel) else part.model
            outputs = _outputs(model, part.outputs, options)
            limits = input_limits(model)
            length = options.sequence_length if part.sequence_length is None else part.sequence_length
            limits.check_sequence_length(length)
            if tokenizer is None:
                tokenizer = _text_tokenizer(model, vocabulary, options, limits, outputs)
            servable = Servable(model, outputs, check_servable(model, outputs.extra_inputs), limits)
            setattr(endpoint, key, servable)
            truncate = options.truncate if part.truncate is None else part.truncate
            served = text_signatures(servable, tokenizer, length, truncate)
            signatures[key] = served["serving_default"]
            if "embed" in served:
                signatures[f"{key}_embed"] = served["embed"]
        signatures["serving_default"] = signatures[first]
        return _write(endpoint, {name: signatures}, {name: tokenizer.tokenizer}, base_dir, options)


def _reads_first_token(model, tokenizer):
    """Whether the ids endpoints must refuse a row that starts with padding: the encoder's own
    answer, else (a model composed from the layers) the layout of its tokenizer, BERT's by default."""
    encoder = next((layer for layer in backend.flatten_layers(model) if isinstance(layer, EncoderBase)), None)
    if encoder is not None:
        return bool(encoder.reads_first_token)
    layout = getattr(tokenizer, "layout", None)
    return bool(layout.start) if layout is not None else True


def _outputs(model, outputs, options):
    """The served outputs adapter, bound to `model`."""
    if outputs is None:
        outputs = default_outputs(model, options.label_names, options.max_answer_length, options.max_query_length)
    elif options.label_names is not None:
        raise ValueError("label_names goes to ClassifierOutputs(label_names=...) when outputs= is given.")
    if not isinstance(outputs, ModelOutputs):
        raise TypeError(f"outputs must be a ModelOutputs adapter (bertlayers.export), got {type(outputs).__name__}.")
    return outputs.bind(model)


def _text_tokenizer(model, vocabulary, options, limits, outputs):
    """The in-graph tokenizer of the text model, from the vocabulary given or recorded."""
    if vocabulary is None:
        raise ValueError(
            f"{type(model).__name__} {model.name!r} has no recorded vocabulary, so its text model would tokenize "
            "with a guess: pass vocabulary= (the vocab.txt it was trained with), record one with "
            "bertlayers.convert.record_tokenizer(model, path), or export the ids model alone (text=False)."
        )
    lowercase = options.lowercase  # a WordPiece vocabulary's lower-casing, where it is given
    tokenizer = model_tokenizer(vocabulary, True if lowercase is None else lowercase)
    if lowercase is not None and tokenizer.is_wordpiece_vocabulary:
        tokenizer = dataclasses.replace(tokenizer, lowercase=bool(lowercase))
    tokenizer = outputs.text_tokenizer(tokenizer.in_graph(limits.vocabulary_size))
    if outputs.text_kind == "question_context" and not tokenizer.layout.start:
        raise ValueError(
            "A question-answering text model reads the null answer at the first token; this model's input layout "
            f"has no token before the text (it starts {list(tokenizer.layout.start)}, ends {list(tokenizer.layout.end)}), "
            "which it does not support yet. Export the ids model alone (text=False)."
        )
    return tokenizer


def _write(module, signatures, tokenizers, base_dir, options):
    """Stage each SavedModel of `signatures` ({name: its signatures}, the first an ids model unless it
    has a tokenizer in `tokenizers`), commit them together, list them in models.config."""
    names = list(signatures)
    recover_exports(base_dir)
    version = options.version
    if version is None:
        version = max(next_version(os.path.join(base_dir, n)) for n in names)
    finals = {n: os.path.join(base_dir, n, str(version)) for n in names}
    for final in finals.values():
        if os.path.exists(final):
            raise FileExistsError(f"{final} exists already; versions are never overwritten.")
    staged = {}
    try:
        for n in names:
            os.makedirs(os.path.dirname(finals[n]), exist_ok=True)
            staging = os.path.join(base_dir, n, atomic_files.staging_name(str(version)))
            if n in tokenizers:  # a text model's tables and files travel with it
                module.tokenizer = tokenizers[n]
            if options.verbose:
                logger.info(f"Writing {finals[n]} ({len(signatures[n])} signatures) ...")
            staged[staging] = finals[n]
            tf.saved_model.save(module, staging, signatures=signatures[n])
            if n in tokenizers:  # text models are batched by TF Serving; ids models are not (serving_folder)
                batch_in_tf_serving(staging)
            check_same_endpoint(os.path.join(base_dir, n), staging)
        commit_together(base_dir, staged)
    except Exception as error:
        if atomic_files.is_disk_full(error):
            raise atomic_files.disk_full_error(", ".join(finals.values())) from error
        raise
    finally:
        for staging in staged:
            shutil.rmtree(staging, ignore_errors=True)
        for n in names:  # a model folder this failed export made and left empty
            if os.path.isdir(os.path.join(base_dir, n)) and not os.listdir(os.path.join(base_dir, n)):
                os.rmdir(os.path.join(base_dir, n))
    write_models_config(base_dir, options.serving_base, names)
    return finals
