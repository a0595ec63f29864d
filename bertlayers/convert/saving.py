"""Save a model back as a Hugging Face folder: `config.json` in transformers' own keys,
`model.safetensors` in its tensor names and layout, and the tokenizer's files.

The layout is not written a second time: each family's loader already says which checkpoint
tensor every variable comes from and how (a transpose, a reshape into heads, a chunk of a fused
matrix, the rows of a position table). `save_huggingface` runs that loader over the folder being
written with a `Probe` (`bertlayers.convert.weight_map`), which records the map instead of
assigning it, and reads it backwards: each transform is applied to an array of element indices
of the checkpoint tensor's shape, which says where each variable element goes. A loader and its
saver cannot disagree; loading what was saved gives the same model (tests/test_save_huggingface.py).
"""

import logging
import os

import keras
import numpy as np

from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES
from bertlayers.convert.model_files import recorded_tokenizer
from bertlayers.convert.weight_map import Probe
from bertlayers.networks.encoder_base import EncoderBase
from bertlayers.utils import atomic_files

logger = logging.getLogger(__name__)

# The names transformers' task heads take in a checkpoint: every other tensor belongs to the base
# model, and is written under its prefix ("bert.", "roberta.") when a head is saved with it.
HEAD_NAMES = {
    "cls",
    "lm_head",
    "predictions",
    "vocab_transform",
    "vocab_layer_norm",
    "vocab_projector",
    "generator_predictions",
    "generator_lm_head",
    "discriminator_predictions",
    "head",
    "decoder",
    "lm_loss",
    "classifier",
    "pre_classifier",
    "sequence_summary",
    "logits_proj",
    "sop_classifier",
    "dense",  # EuroBERT's classification head
    "score",  # the decoders' last-token classifiers (Qwen3ForSequenceClassification)
}
# The tensors whose presence tells each family's loader which head a folder holds.
HEAD_MARKERS = {
    "mlm": (
        "cls.predictions.transform.dense.weight",
        "lm_head.dense.weight",
        "predictions.dense.weight",
        "vocab_transform.weight",
        "head.dense.weight",
        "lm_head.weight",
        "lm_loss.bias",
        "decoder.bias",
        "generator_predictions.dense.weight",
    ),
    "discriminator": ("discriminator_predictions.dense.weight",),
    "classifier": (
        "classifier.weight",
        "classifier.out_proj.weight",
        "logits_proj.weight",
        "sequence_summary.summary.weight",
        "score.weight",
    ),
}
POOLER_MARKERS = ("pooler.dense.weight", "pooler.weight")
# The model_type an encoder architecture is saved as when its vocabulary does not say.
DEFAULT_MODEL_TYPES = {
    "bert": "bert",
    "albert": "albert",
    "modernbert": "modernbert",
    "gte": "gte",
    "eurobert": "eurobert",
    "qwen3": "qwen3",
    "gemma3": "gemma3_text",
    "deberta_v2": "deberta-v2",
}


class _ProbeTensors(dict):
    """The tensors a loader is shown while its map is read: the head's marker names (so it builds
    that head), each a `[num_labels, 1]` array (a classifier's label count is read off its shape)."""

    def __init__(self, names, num_labels):
        super().__init__({name: np.zeros((num_labels, 1), "float32") for name in names})


def save_huggingface(model: keras.Model, folder: str, model_type: str | None = None) -> str:
    """Write `model` as a Hugging Face checkpoint folder that transformers and
    `bertlayers.convert.load_checkpoint` load: `config.json` (transformers' keys and the class in
    `architectures`), `model.safetensors`, and the tokenizer's files (a WordPiece `vocab.txt` with
    its `tokenizer_config.json`, or the checkpoint's own files it was loaded with).

    Args:
      model: an encoder, a pretrainer with a masked-LM head (`lm_head`; a sentence head such as
        NSP is not written), an ELECTRA generator or discriminator, a `SequenceClassifier`
        (its `label_names` as `id2label`), or a `SentenceEmbedder`, written as a
        sentence-transformers folder (`save_sentence_transformers`: its pooling, dense layers and
        normalization, which a plain checkpoint cannot say).
      folder: a new folder (an existing one is refused); written whole or not at all.
      model_type: transformers' model_type to write; default: the one the model's tokenizer
        files were loaded with, else the family of its class (ELECTRA's generator and
        discriminator), else by the encoder's architecture ("bert", "albert").

    Returns:
      `folder`.

    Raises:
      ValueError: a model_type the library cannot write yet, a model whose structure is not
        one that model_type's loader builds, or that transformers would compute otherwise (a
        classifier's pooling, an encoder setting: named, here and there), a model with no
        vocabulary recorded.
      FileExistsError: `folder` exists.

    Example (a classifier over the bundled MiniLM, saved and loaded back):

    >>> from bertlayers.convert import load_checkpoint
    >>> from bertlayers.models import SequenceClassifier
    >>> from bertlayers.utils.assets import minilm_path
    >>> encoder = load_checkpoint(minilm_path()).encoder
    >>> save_huggingface(SequenceClassifier(encoder, label_names=["no", "yes"]), "minilm-yes-no")
    'minilm-yes-no'
    >>> sorted(os.listdir("minilm-yes-no"))
    ['config.json', 'model.safetensors', 'tokenizer_config.json', 'vocab.txt']
    >>> load_checkpoint("minilm-yes-no").model.label_names
    ['no', 'yes']
    """
    from bertlayers.models.sentence_embedder import SentenceEmbedder

    if isinstance(model, SentenceEmbedder):  # its pooling and dense layers mean nothing in a plain checkpoint
        from bertlayers.convert.sentence_transformers import save_sentence_transformers

        return save_sentence_transformers(model, folder)
    encoder = model if isinstance(model, EncoderBase) else getattr(model, "encoder", None)
    if not isinstance(encoder, EncoderBase):
        raise ValueError(f"save_huggingface takes a model built on a bertlayers encoder, got a {type(model).__name__}.")
    vocabulary = recorded_tokenizer(model)
    if vocabulary is None:
        raise ValueError(
            "The model has no vocabulary recorded, and a checkpoint folder needs its tokenizer: record it with "
            "bertlayers.convert.record_tokenizer(model, ...) first."
        )
    if model_type is None:
        model_type = (
            vocabulary.model_type
            if vocabulary.model_type is not None
            else model.checkpoint_model_type  # a family's own model class (ELECTRA's generator, discriminator)
            if getattr(model, "checkpoint_model_type", None)
            else "nomic_bert"
            if encoder.config.architecture == "bert" and encoder.config.attention == "rotary"
            else DEFAULT_MODEL_TYPES.get(encoder.config.architecture)
        )
    family = HUGGINGFACE_FAMILIES.get(model_type)
    writable = sorted(t for t, f in HUGGINGFACE_FAMILIES.items() if f.write_config is not None)
    if family is None or family.write_config is None:
        raise ValueError(
            f"save_huggingface cannot write model_type {model_type!r} (architecture {encoder.config.architecture!r}) "
            f"yet; it writes {', '.join(writable)}."
        )
    kind = _head_kind(model)
    if kind not in family.architectures:
        raise ValueError(f"save_huggingface cannot write a {type(model).__name__} as a {model_type} checkpoint.")
    if os.path.exists(folder):
        raise FileExistsError(f"{folder} exists; save_huggingface writes a new folder.")

    # A last-token classifier's pad id is the one its head passes over (transformers reads the last
    # token whose id is not pad_token_id); a model without one is compared as the vocabulary's.
    pad_id = vocabulary.pad_id if getattr(model, "pad_id", None) is None else model.pad_id
    if kind == "classifier" and getattr(model, "pooling", None) == "last" and pad_id is None:
        raise ValueError(
            f"transformers' {family.architectures[kind]} finds each row's last token as the last whose id is not "
            "config.json's pad_token_id, and neither this classifier (pad_id) nor its tokenizer has one: build it "
            "with pad_id=... (the tokenizer's pad token) to write it."
        )
    hf_config = {
        "architectures": [family.architectures[kind]],
        "model_type": model_type,
        **family.write_config(encoder, pad_id),
        "tie_word_embeddings": bool(encoder.config.tie_word_embeddings),
        "dtype": "float32",
    }
    read_back = family.read_config(hf_config, "config.json")
    if read_back.architecture != encoder.config.architecture:
        raise ValueError(
            f"A {encoder.config.architecture} encoder cannot be written as a {model_type} checkpoint (whose "
            f"encoder is {read_back.architecture}'s); pass the model_type it was loaded as."
        )
    labels = getattr(model, "label_names", None) if kind == "classifier" else None
    num_labels = int(getattr(model, "num_classes", 2) or 2)
    if kind == "classifier":
        labels = labels or [f"LABEL_{i}" for i in range(num_labels)]
        hf_config.update(id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)})
        if num_labels == 1:
            hf_config["problem_type"] = "regression"
    with atomic_files.atomic_path(folder) as staging:
        os.makedirs(staging)
        atomic_files.write_json(os.path.join(staging, "config.json"), hf_config, indent=2)
        for name, data in vocabulary.folder_files().items():
            atomic_files.write_bytes(os.path.join(staging, name), data)
        tensors = _checkpoint_tensors(model, encoder, family, kind, staging, num_labels)
        from safetensors.numpy import save_file

        save_file(tensors, os.path.join(staging, "model.safetensors"), metadata={"format": "pt"})
    logger.info(f"Saved {type(model).__name__} as {family.architectures[kind]} ({len(tensors)} tensors) to {folder}")
    return folder


def _head_kind(model):
    from bertlayers.models.sequence_classifier import SequenceClassifier

    if isinstance(model, SequenceClassifier):
        return "classifier"
    if isinstance(model, EncoderBase):
        return "base"
    if hasattr(model, "discriminator_head"):
        return "discriminator"
    if hasattr(model, "lm_head") or hasattr(model, "generator_head"):
        return "mlm"
    return type(model).__name__


def _checkpoint_tensors(model, encoder, family, kind, folder, num_labels):
    """{checkpoint name: array} of `model`: the family's loader run over `folder` under a
    `Probe`, its map read backwards (see the module)."""
    markers = HEAD_MARKERS.get(kind, ()) + (POOLER_MARKERS if kind in ("base", "classifier") else ())
    if kind == "mlm" and encoder.config.use_bias:
        markers += ("lm_head.bias",)  # EuroBERT's head has a bias where its projections do
    with Probe(_ProbeTensors(markers, num_labels)) as probe:
        built = family.loader(folder)
    ours, theirs = model.weights, built.weights

    def refuse_structure():
        raise ValueError(
            f"A {type(model).__name__} does not have the structure {family.model_type}'s loader builds from its "
            f"config ({type(built).__name__}, {len(theirs)} weights against {len(ours)}): it cannot be written as "
            f"{family.architectures[kind]}. Pass the model_type the encoder was loaded as (model_type=...) where it is "
            "another family's."
        )

    if type(built).__name__ != type(model).__name__:
        refuse_structure()
    # Before the weights' shapes: a setting named says more than a count of weights.
    differences = _computed_differently(model, built)

    def named(name):
        return any(d.startswith(name + " ") for d in differences)

    if differences:
        raise ValueError(
            f"transformers' {family.architectures[kind]} would compute this {type(model).__name__} differently: "
            f"{'; '.join(differences)} (there: as the {family.model_type} folder being written reads). "
            + (
                "A classifier saved for transformers reads what its head class reads: build it with "
                + ", ".join(f"{name}={getattr(built, name)!r}" for name in HEAD_SETTINGS if named(name))
                + ", or save the encoder alone. "
                if any(named(name) for name in HEAD_SETTINGS)
                else ""
            )
            + "Pass the model_type the encoder was loaded as (model_type=...) where it is another family's."
        )
    if [tuple(v.shape) for v in ours] != [tuple(v.shape) for v in theirs]:
        refuse_structure()
    value_of = {id(variable): keras.ops.convert_to_numpy(mine) for variable, mine in zip(theirs, ours)}
    moved = [what for variable, value, what in probe.fixed if not np.array_equal(value_of[id(variable)], value)]
    if moved:
        raise ValueError(
            f"transformers' {family.architectures[kind]} has no tensor for {', '.join(moved)}, and this "
            f"{type(model).__name__}'s has moved off the value the class implies (zeros: its logits have no offset, "
            "a fine-tune trained it): written, the folder would compute other logits. Reset it to zeros (or "
            "freeze it before training) to write the model."
        )
    by_key, keys_of = {}, {}
    for variable, key, transform in probe.pairs:
        by_key.setdefault(key, []).append((variable, transform))
        keys_of.setdefault(id(variable), set()).add(key)
    # A variable two names read (RoBERTa's pooler, which its classifier's `classifier.dense` fills
    # where the base model's `pooler.dense` is absent) is written under the head's name alone.
    heads = HEAD_NAMES | family.head_names
    for key in list(by_key):
        if key.split(".")[0] not in heads and all(
            any(k.split(".")[0] in heads for k in keys_of[id(v)] - {key}) for v, _ in by_key[key]
        ):
            del by_key[key]
    tensors = {}
    for key, pairs in by_key.items():
        shape = probe.shapes.get(key) or _checkpoint_shape(key, pairs)
        array = np.zeros(shape, "float32")
        index = np.arange(array.size).reshape(shape)
        for variable, transform in pairs:
            positions = transform(index) if transform else index
            array.reshape(-1)[np.asarray(positions).reshape(-1)] = value_of[id(variable)].reshape(-1)
        name = key if kind == "base" or key.split(".")[0] in heads or not probe.prefix else probe.prefix + key
        tensors[name] = array
    if encoder.config.tie_word_embeddings:
        return tensors
    # An untied LM head keeps its bias as the decoder's too (transformers reads that one).
    for head in ("lm_head", "cls.predictions", "predictions"):
        if head + ".bias" in tensors and head + ".decoder.bias" not in tensors:
            tensors[head + ".decoder.bias"] = tensors[head + ".bias"].copy()
    return tensors


# A classifier head's settings that a family's head class fixes (`SequenceClassifier`'s arguments).
HEAD_SETTINGS = ("pooling", "output_bias", "pad_id")
# Settings that change no output: training-time noise, how new weights are drawn.
_NOT_COMPUTED = {"dropout", "attention_dropout", "initializer_range"}


def _computed_differently(model, built):
    """What `model` computes otherwise than `built` (the model the folder being written loads as):
    its encoder's settings and a classifier's pooling, as "name ours here, theirs there"."""
    import dataclasses

    mine = model if isinstance(model, EncoderBase) else model.encoder
    theirs = built if isinstance(built, EncoderBase) else built.encoder

    def settings(config):
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in _NOT_COMPUTED}
        # A width or head count equal to the default one is that default (the same layers are built).
        for name, default in (("embedding_size", config.hidden_size), ("num_key_value_heads", config.num_heads)):
            if values.get(name) == default:
                values[name] = None
        return values

    ours, theirs = settings(mine.config), settings(theirs.config)
    if getattr(model, "pooling", None) != "pooler":  # the pooler computes nothing the saved model answers
        for name in ("pooler_activation", "pooling_position"):
            ours.pop(name), theirs.pop(name)
    differences = [f"{name} {ours[name]!r} here, {theirs[name]!r} there" for name in ours if ours[name] != theirs[name]]
    for name in HEAD_SETTINGS:
        if getattr(model, name, None) != getattr(built, name, None):
            differences.append(f"{name} {getattr(model, name, None)!r} here, {getattr(built, name, None)!r} there")
    return differences


def _checkpoint_shape(key, pairs):
    """The shape of checkpoint tensor `key`, where the loader did not give it (`WeightMap.add(...,
    shape=)` does wherever a transform reshapes): the variable's shape, its transpose, or a table
    with leading rows the variable skips (RoBERTa's positions), whichever every transform turns
    into its variable's shape."""
    shape = tuple(pairs[0][0].shape)
    candidates = [shape, shape[::-1]] + ([(shape[0] + extra, *shape[1:]) for extra in (1, 2, 3)] if shape else [])
    for candidate in candidates:
        index = np.arange(int(np.prod(candidate))).reshape(candidate)
        try:
            if all(np.shape(transform(index) if transform else index) == tuple(v.shape) for v, transform in pairs):
                return candidate
        except (ValueError, IndexError):
            continue
    raise ValueError(f"Cannot tell the checkpoint shape of {key} from the variables read from it.")


__all__ = ["save_huggingface"]
