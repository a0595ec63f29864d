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

import json
import logging
import os
import re
import shutil
import uuid

from bertlayers.convert.model_files import recorded_vocabulary
from bertlayers.export.request_checks import checked_id_request, checked_ranks, checked_text_request
from bertlayers.export.serving_outputs import (
    ID_INPUTS,
    check_servable,
    default_outputs,
)
from bertlayers.layers.masking import mask_logits
from bertlayers.models.encoder_model import EncoderModel
from bertlayers.networks.encoder_base import EncoderBase
from bertlayers.networks.input_limits import input_limits
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.checkpoint_tokenizer import CheckpointTokenizer, TokenizerFiles
from bertlayers.tokenizers.tokenizer import ModelVocabulary, check_vocabulary_fits
from bertlayers.tokenizers.wordpiece import InGraphTokenizer
from bertlayers.utils import atomic_files

logger = logging.getLogger(__name__)

tf = require_tensorflow(__name__)


class _Servable(tf.Module):
    """The model's computation with named, batch-first outputs; variables tracked once."""

    def __init__(self, model, outputs, input_names, limits):
        super().__init__()
        self._model = model  # not tracked as a Keras object: its variables are tracked below
        self.outputs = outputs  # a `serving_outputs` adapter
        self.model_variables = [v.value for v in model.variables]
        self.input_names = input_names
        self.limits = limits

    def __setattr__(self, name, value):
        if name in ("_model", "outputs"):  # keep Keras's own trackables out of the SavedModel graph
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def run(self, inputs):
        """{input name: tensor} (the model's inputs) -> {output name: tensor}."""
        # float32 out whatever the model computes in: clients see one signature for every precision.
        outputs = self.outputs(self._model, inputs)
        return {key: tf.cast(value, tf.float32) if value.dtype.is_floating else value for key, value in outputs.items()}


def best_span(start_logits, end_logits, start_allowed, end_allowed, max_answer_length):
    """The best (start, end) with end ≥ start, length ≤ `max_answer_length`, the start where
    `start_allowed` and the end where `end_allowed` (bool `[b, seq]`: context pieces that begin /
    finish a word, so no answer is cut inside a word), its score, and the null ([CLS]) score."""
    scores = tf.expand_dims(start_logits, 2) + tf.expand_dims(end_logits, 1)  # [b, start, end]
    # A request shorter than the answer limit has fewer columns than the band's width, which
    # band_part refuses: the band is then the whole upper triangle.
    width = tf.minimum(max_answer_length - 1, tf.shape(scores)[-1] - 1)
    band = tf.linalg.band_part(tf.ones_like(scores[0], tf.bool), 0, width)
    band = tf.logical_and(band, tf.pad(tf.ones_like(band[1:, 1:]), [[1, 0], [1, 0]]))  # not [CLS]
    allowed = tf.logical_and(tf.expand_dims(start_allowed, 2), tf.expand_dims(end_allowed, 1))
    scores = mask_logits(scores, tf.logical_and(tf.expand_dims(band, 0), allowed))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [b, start * end]
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    length = tf.shape(scores)[2]
    return best // length, best % length, tf.reduce_max(flat, axis=-1), start_logits[:, 0] + end_logits[:, 0]


def _id_signatures(servable, sequence_length, truncate):
    # Any length: the checks refuse (or cut, with `truncate`) what is past `sequence_length`.
    spec = lambda name: tf.TensorSpec([None, None], tf.int32, name=name)  # noqa: E731
    names = servable.input_names
    limits = servable.limits

    def prepare(token_ids, segment_ids=None, padding_mask=None):
        given = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        inputs = checked_id_request(
            {name: given[name] for name in names},
            sequence_length,
            limits.vocabulary_size,
            limits.type_vocab_size,
            truncate,
        )
        # The model runs at the request's own length (no padding to the exported one).
        return servable.run(inputs)

    serving_default = tf.function(
        lambda *tensors: prepare(**dict(zip(names, tensors))), input_signature=[spec(n) for n in names]
    )
    signatures = {"serving_default": serving_default}
    # TF Serving signatures have no optional inputs: these derive what is left out
    # (segment 0 everywhere; the mask from [PAD] = 0).
    if names != ["token_ids"]:

        @tf.function(input_signature=[spec("token_ids")])
        def token_ids_only(token_ids):
            token_ids = checked_ranks({"token_ids": token_ids}, 2, "[batch, sequence_length]")["token_ids"]
            return prepare(token_ids, tf.zeros_like(token_ids), tf.cast(tf.not_equal(token_ids, 0), tf.int32))

        signatures["token_ids_only"] = token_ids_only
    if names == list(ID_INPUTS):

        @tf.function(input_signature=[spec("token_ids"), spec("padding_mask")])
        def token_ids_and_mask(token_ids, padding_mask):
            token_ids = checked_ranks({"token_ids": token_ids}, 2, "[batch, sequence_length]")["token_ids"]
            return prepare(token_ids, tf.zeros_like(token_ids), padding_mask)

        signatures["token_ids_and_mask"] = token_ids_and_mask
    return signatures


def _text_signatures(servable, tokenizer, sequence_length, truncate):
    text = lambda name: tf.TensorSpec([None], tf.string, name=name)  # noqa: E731
    outputs_kind = servable.outputs

    def run_ids(token_ids, segment_ids, padding_mask, span_mask=None):
        given = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        extra = {} if span_mask is None else {"span_mask": span_mask}
        return servable.run({**{name: given[name] for name in servable.input_names}, **extra})

    if outputs_kind.text_kind == "question_context":

        @tf.function(input_signature=[text("question"), text("context")])
        def serving_default(question, context):
            checked = checked_text_request({"question": question, "context": context})
            question, context = checked["question"], checked["context"]
            question_ids = tokenizer.tokenize(question)
            question_ids = question_ids[:, : outputs_kind.max_query_length]
            context_ids, starts, ends, starts_word, ends_word = tokenizer.tokenize_with_offsets(context)
            token_ids, segment_ids, padding_mask = tokenizer.layout.pack(
                question_ids, context_ids, sequence_length, truncation=tokenizer.truncation, truncate=truncate
            )
            # Context token k sits after the special tokens and the question.
            offset = (
                tf.cast(question_ids.row_lengths(), tf.int32)
                + len(tokenizer.layout.start)
                + len(tokenizer.layout.between)
            )

            def at_positions(flags):  # ragged [b, (context)] → [b, seq], False outside the context
                before = tf.ragged.range(tf.zeros_like(offset), offset) < 0
                return tf.concat([before, flags], axis=1).to_tensor(False, shape=tf.shape(token_ids))

            # The context's kept pieces (before the closing special tokens) and the null answer at 0.
            column = tf.range(tf.shape(token_ids)[1])[tf.newaxis, :]
            closing = tf.reduce_sum(padding_mask, axis=1, keepdims=True) - len(tokenizer.layout.end)
            context_mask = at_positions(tf.ones_like(starts_word)) & (column < closing)
            span_mask = tf.cast(context_mask | (column == 0), tf.int32)
            outputs = run_ids(token_ids, segment_ids, padding_mask, span_mask)

            start, end, score, null_score = best_span(
                outputs["start_logits"],
                outputs["end_logits"],
                at_positions(starts_word),
                at_positions(ends_word),
                outputs_kind.max_answer_length,
            )
            first, last = start - offset, end - offset
            start_byte = tf.gather(starts, tf.maximum(first, 0), batch_dims=1)
            end_byte = tf.gather(ends, tf.maximum(last, 0), batch_dims=1)
            start_byte, end_byte = tf.cast(start_byte, tf.int32), tf.cast(end_byte, tf.int32)
            answer = tf.strings.substr(context, start_byte, end_byte - start_byte, unit="BYTE")
            prefix = tf.strings.substr(context, tf.zeros_like(start_byte), start_byte, unit="BYTE")
            answer_start = tf.strings.length(prefix, unit="UTF8_CHAR")
            return {
                "answer_text": answer,
                "answer_start": answer_start,
                "answer_end": answer_start + tf.strings.length(answer, unit="UTF8_CHAR"),
                "score": score,
                "null_score": null_score,
                "start_logits": outputs["start_logits"],
                "end_logits": outputs["end_logits"],
            }

        return {"serving_default": serving_default}

    def run(first, second):
        token_ids, segment_ids, padding_mask = tokenizer.layout.pack(
            first, second, sequence_length, truncation=tokenizer.truncation, truncate=truncate
        )
        outputs = run_ids(token_ids, segment_ids, padding_mask)
        if outputs_kind.returns_pieces:
            outputs["token_ids"] = token_ids
        return outputs

    @tf.function(input_signature=[text("text")])
    def serving_default(texts):
        texts = checked_text_request({"text": texts})["text"]
        return run(tokenizer.tokenize(texts), None)

    @tf.function(input_signature=[text("text_a"), text("text_b")])
    def text_pair(text_a, text_b):
        checked = checked_text_request({"text_a": text_a, "text_b": text_b})
        text_a, text_b = checked["text_a"], checked["text_b"]
        return run(tokenizer.tokenize(text_a), tokenizer.tokenize(text_b))

    return {"serving_default": serving_default, "text_pair": text_pair}


def next_version(model_dir):
    """1 + the largest integer version folder under `model_dir` (1 when there is none)."""
    versions = [int(n) for n in os.listdir(model_dir) if n.isdigit()] if os.path.isdir(model_dir) else []
    return max(versions, default=0) + 1


def signature_summary(version_dir):
    """{signature key: (inputs {name: "dtype shape"}, output names)} of the SavedModel in
    `version_dir`, read from its `saved_model.pb` (nothing is loaded)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as file:
        saved.ParseFromString(file.read())
    summary = {}
    for key, signature in saved.meta_graphs[0].signature_def.items():
        inputs = {
            name: f"{tf.dtypes.as_dtype(info.dtype).name} {[d.size for d in info.tensor_shape.dim]}"
            for name, info in signature.inputs.items()
        }
        summary[key] = (inputs, sorted(signature.outputs))
    return summary


def check_same_endpoint(model_dir, staged_dir):
    """Refuse a new version whose signatures (their names, inputs or outputs) differ from the newest
    version's in `model_dir`: TF Serving serves the newest version, so its clients would find the
    endpoint's inputs changed under them (a text model replaced by an ids model, say)."""
    versions = sorted(
        (
            int(n)
            for n in os.listdir(model_dir)
            if n.isdigit() and os.path.isfile(os.path.join(model_dir, n, "saved_model.pb"))
        ),
        reverse=True,
    )
    if not versions:
        return
    newest = os.path.join(model_dir, str(versions[0]))
    old, new = signature_summary(newest), signature_summary(staged_dir)
    if old == new:
        return
    keys = sorted(set(old) | set(new))
    changed = next(k for k in keys if old.get(k) != new.get(k))
    raise ValueError(
        f"{model_dir} serves another kind of model: its newest version ({newest}) has signature {changed!r} "
        f"{_described(old.get(changed))}, this export {_described(new.get(changed))}. A model name keeps its "
        "inputs and outputs across versions (TF Serving switches its clients to the newest); export under another name."
    )


def _described(entry):
    if entry is None:
        return "absent"
    inputs, outputs = entry
    return f"with inputs {dict(sorted(inputs.items()))} and outputs {outputs}"


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_JOURNAL = ".export-journal-"


def check_model_name(name):
    """A TF Serving model name that is one folder under the base: no path tricks."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(
            f"Model name {name!r} must start with a letter or digit and use letters, digits, '_', '.' "
            f"and '-' only (no '..', no '/'): it names a folder under the export base."
        )
    return name


def recover_exports(base_dir):
    """Finish exports killed while renaming their versions into place, and drop half-written ones.

    Call it holding the base's lock (`atomic_files.locked(base_dir)`): an export stages every
    SavedModel of a pair first, then writes a journal naming the renames, then renames. A
    journal left behind means all its stages are complete, so its renames are completed (the
    pair appears together); a journal still being written (`.partial`, left by a kill or a full
    disk) and a stage whose writer is dead are unfinished writes and are removed. Nothing else
    is touched: a live writer's stages, and folders the library did not write, stay.
    """
    if not os.path.isdir(base_dir):
        return
    atomic_files.remove_orphaned_staging(base_dir)  # journals being written when their writer died
    for name in os.listdir(base_dir):  # the same, as this library once named them
        if name.startswith(_JOURNAL) and name.endswith(".json.partial"):
            os.remove(os.path.join(base_dir, name))
    for journal in sorted(n for n in os.listdir(base_dir) if n.startswith(_JOURNAL) and n.endswith(".json")):
        path = os.path.join(base_dir, journal)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            renames = [(str(a), str(b)) for a, b in json.loads(text)]
        except (ValueError, TypeError):
            raise ValueError(
                f"{path} is not an export journal this library wrote (it should list [staging, final] "
                f"folder pairs); move it out of {base_dir} and export again."
            ) from None
        for staging, final in renames:
            if os.path.isdir(staging) and not os.path.exists(final):
                os.rename(staging, final)
        os.remove(path)
    for name in os.listdir(base_dir):
        model_dir = os.path.join(base_dir, name)
        if os.path.isdir(model_dir) and not name.startswith("."):
            atomic_files.remove_orphaned_staging(model_dir)


def _commit_together(base_dir, staged):
    """Rename every {staging folder: final folder} into place, as one unit (see recover_exports)."""
    journal = os.path.join(base_dir, f"{_JOURNAL}{uuid.uuid4().hex[:8]}.json")
    atomic_files.write_json(journal, [[os.path.abspath(a), os.path.abspath(b)] for a, b in staged.items()])
    for staging, final in staged.items():
        os.rename(staging, final)
    os.remove(journal)


def is_model_folder(path):
    """Whether `path` holds at least one SavedModel version (`<integer>/saved_model.pb`): what
    TF Serving can load, and so what `models.config` names."""
    return os.path.isdir(path) and any(
        n.isdigit() and os.path.isfile(os.path.join(path, n, "saved_model.pb")) for n in os.listdir(path)
    )


def write_models_config(base_dir):
    """Write <base>/models.config naming every model folder under `base_dir` (atomically).

    A folder counts as a model when TF Serving can load it (`is_model_folder`): leftovers
    (a `stale.partial/`, an empty folder) are not listed.
    """
    names = sorted(
        n
        for n in os.listdir(base_dir)
        if re.fullmatch(r"[A-Za-z0-9_.-]+", n) and not n.startswith(".") and is_model_folder(os.path.join(base_dir, n))
    )
    entries = "".join(
        f'  config {{\n    name: "{n}"\n    base_path: "{os.path.abspath(os.path.join(base_dir, n))}"\n'
        f'    model_platform: "tensorflow"\n  }}\n'
        for n in names
    )
    path = os.path.join(base_dir, "models.config")
    atomic_files.write_text(path, "model_config_list {\n" + entries + "}\n")
    return path


PRECISIONS = ("float32", "bfloat16")


def in_precision(model, precision):
    """`model` itself for float32; for bfloat16 a copy of a library model built with a bfloat16
    encoder (the heads follow the encoder's dtype policy) holding the same weights, rounded."""
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; expected one of {PRECISIONS}.")
    if precision == "float32":
        return model
    config = model.get_config()
    if isinstance(model, EncoderBase):
        config["dtype"] = precision
    elif isinstance(getattr(model, "encoder", None), EncoderBase) and "encoder" in config:
        config["encoder"] = {**config["encoder"], "config": {**config["encoder"]["config"], "dtype": precision}}
    else:
        raise ValueError(
            f"precision='bfloat16' rebuilds the library's encoders and task models; for {model.name!r} build "
            "the model with dtype='bfloat16' (or a bfloat16 dtype policy) and export it as float32."
        )
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def export_for_serving(
    model,
    name,
    base_dir="savedmodels",
    vocabulary=None,
    lowercase=None,
    text=True,
    outputs=None,
    sequence_length=128,
    truncate=False,
    version=None,
    max_query_length=64,
    max_answer_length=30,
    label_names=None,
    precision="float32",
    verbose=False,
):
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
      vocabulary: the WordPiece vocab.txt (or tokens, or a `ModelVocabulary`), or a checkpoint's
        `TokenizerFiles` (byte-level BPE, SentencePiece), the model was trained with. Default: the one
        recorded with the model (`bertlayers.convert.record_vocabulary`; the runners and
        `load_encoder` record theirs, and `load_model_file` reads it back).
      lowercase: lower-case text first. Default: as recorded with the vocabulary, else True.
      text: also write NAME_text. A model with no recorded vocabulary and none given is refused.
      outputs: what the served model returns (`bertlayers.export.serving_outputs`): default the
        task's outputs for the library's models and every model output under its name otherwise;
        e.g. `ClassifierOutputs(label_names=...)` serves your own head's logits as a classifier.
      sequence_length: the longest request, in pieces (at most the model's limit).
      truncate: cut over-long requests to `sequence_length` instead of rejecting them.
      version: the integer version; default the next free one (the same for both models).
      max_query_length, max_answer_length: SQuAD text model limits, in pieces.
      label_names: a classifier's label strings, by class id: adds a `label_name` output.
        Defaults to the classifier's own `label_names`.
      precision: "float32", or "bfloat16" to compute a library model in bfloat16 (weights stored in
        bfloat16, half the size; outputs still float32). Faster only where the processor has fast
        bfloat16 products (AMX, AVX512-BF16, recent GPUs): `benchmarks/compare.py` measures it.
      verbose: print each SavedModel as it is written (tracing and saving take a while).

    Returns:
      {model name: version folder}.

    Raises:
      ValueError: the model has an input TF Serving cannot feed or an output without a batch axis;
        no vocabulary is recorded or given for the text model; the vocabulary does not fit the
        model; `sequence_length` exceeds the model's limit.
    """
    check_model_name(name)
    served = model.serving_model() if isinstance(model, EncoderModel) else model
    if served is not model:  # a part of it, whose vocabulary is recorded with the whole
        vocabulary = recorded_vocabulary(model) if vocabulary is None else vocabulary
        model = served
    if outputs is None:
        outputs = default_outputs(model, label_names, max_answer_length, max_query_length)
    elif label_names is not None:
        raise ValueError("label_names goes to ClassifierOutputs(label_names=...) when outputs= is given.")
    outputs = outputs.bind(model)
    input_names = check_servable(model, outputs.extra_inputs)
    limits = input_limits(model)
    if sequence_length > limits.max_sequence_length:
        raise ValueError(
            f"sequence_length {sequence_length} exceeds the model's max_sequence_length {limits.max_sequence_length}."
        )
    tokenizer = None
    if text:
        recorded = recorded_vocabulary(model)
        if vocabulary is None and recorded is None:
            raise ValueError(
                f"{type(model).__name__} {model.name!r} has no recorded vocabulary, so its text model would tokenize "
                "with a guess: pass vocabulary= (the vocab.txt it was trained with), record one with "
                "bertlayers.convert.record_vocabulary(model, path), or export the ids model alone (text=False)."
            )
        if vocabulary is None:
            vocabulary = recorded
        if isinstance(vocabulary, TokenizerFiles):
            tokenizer = vocabulary.checkpoint_tokenizer(limits.vocabulary_size)
        else:
            if isinstance(vocabulary, ModelVocabulary):
                vocabulary, lowercase = vocabulary.tokens, vocabulary.lowercase if lowercase is None else lowercase
            tokenizer = InGraphTokenizer(
                check_vocabulary_fits(vocabulary, limits.vocabulary_size), True if lowercase is None else lowercase
            )
        if outputs.text_kind == "question_context" and not tokenizer.layout.start:
            raise ValueError(
                "A question-answering text model reads the null answer at the first token; this model's layout "
                "puts its summary token last (XLNet's <cls>), which it does not support yet. Export the ids model "
                "alone (text=False)."
            )
    names = [name] + ([f"{name}_text"] if tokenizer else [])
    # One export at a time into a base: versions are numbered, staged, committed and listed in
    # models.config against what the folder holds, and a second writer would race all four.
    with atomic_files.locked(base_dir, "export into"):
        return _export(
            model,
            outputs,
            input_names,
            limits,
            name,
            names,
            base_dir,
            tokenizer,
            sequence_length,
            truncate,
            version,
            precision,
            verbose,
        )


def _export(
    model,
    outputs,
    input_names,
    limits,
    name,
    names,
    base_dir,
    tokenizer,
    sequence_length,
    truncate,
    version,
    precision,
    verbose,
):
    recover_exports(base_dir)
    if version is None:
        version = max(next_version(os.path.join(base_dir, n)) for n in names)
    finals = {n: os.path.join(base_dir, n, str(version)) for n in names}
    for final in finals.values():
        if os.path.exists(final):
            raise FileExistsError(f"{final} exists already; versions are never overwritten.")

    model = in_precision(model, precision)
    servable = _Servable(model, outputs, input_names, limits)
    signatures = {name: _id_signatures(servable, sequence_length, truncate)}
    if tokenizer:
        signatures[f"{name}_text"] = _text_signatures(servable, tokenizer, sequence_length, truncate)
    staged = {}
    try:
        for n in names:
            os.makedirs(os.path.dirname(finals[n]), exist_ok=True)
            staging = os.path.join(base_dir, n, atomic_files.staging_name(str(version)))
            if n.endswith("_text"):  # the tokenizer's tables and files travel with the text model
                servable.tokenizer = tokenizer.tokenizer if isinstance(tokenizer, CheckpointTokenizer) else tokenizer
            if verbose:
                logger.info(f"Writing {finals[n]} ({len(signatures[n])} signatures) ...")
            staged[staging] = finals[n]
            tf.saved_model.save(servable, staging, signatures=signatures[n])
            check_same_endpoint(os.path.join(base_dir, n), staging)
        _commit_together(base_dir, staged)
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
    write_models_config(base_dir)
    return finals
