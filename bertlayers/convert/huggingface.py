"""Load Hugging Face checkpoints (`config.json` + `model.safetensors`), without torch.

The helpers every family's loader uses (BERT's tensor layout, which most families keep, is the
default); each family in `bertlayers.families` registers its own model_type
(`register_huggingface_family`).
"""

import contextlib
import contextvars
import io
import os
from collections.abc import Callable

import numpy as np

from bertlayers.convert.checkpoint_tensors import read_safetensors, renamed
from bertlayers.convert.weight_map import Probe, WeightMap
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.tokenizers.checkpoint_tokenizer import check_tokenizer_files
from bertlayers.utils.text_files import read_json_object
from bertlayers.utils.validation import not_found

# config.json key → EncoderConfig field (Hugging Face kept google-research/bert's names).
BERT_CONFIG_KEYS = {
    "vocab_size": "vocabulary_size",
    "num_hidden_layers": "num_layers",
    "hidden_size": "hidden_size",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "hidden_act": "activation",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "max_position_embeddings": "max_sequence_length",
    "type_vocab_size": "type_vocab_size",
    "layer_norm_eps": "layer_norm_epsilon",
    "initializer_range": "initializer_range",
}
# Tensors a BertModel checkpoint may hold that an encoder has no place for.
IGNORED_TENSORS = (r"position_ids$",)


class HuggingFaceFamily:
    """How one `model_type` of transformers' becomes ours: its `config.json` read into an
    `EncoderConfig` (`read_config(hf_config, source)`) and its folder loaded (`loader(path, dtype=)`)."""

    def __init__(
        self,
        model_type,
        read_config,
        loader,
        write_config=None,
        architectures=None,
        head_names=(),
        classifier_pooling="pooler",
    ):
        self.model_type = model_type
        self.read_config = read_config
        self.loader = loader
        # Saving back (`bertlayers.convert.save_huggingface`): `write_config(encoder, pad_id)` gives
        # config.json's family keys (`config_writer` makes one of a function of the EncoderConfig); `architectures` {"base" | "mlm" | "classifier" | ...:
        # transformers' class} the class a saved model is written as.
        self.write_config = write_config
        self.architectures = architectures or {}
        # Names of this family's task-head tensors beyond the common ones (`saving.HEAD_NAMES`), written
        # without the base model's prefix (DeBERTa's classifier keeps its `pooler` beside the head).
        self.head_names = frozenset(head_names)
        # What the family's `...ForSequenceClassification` reads: "pooler" (a summary of the first
        # token, BERT's), or a `SequencePooling` mode without a pooler ("last": the decoders').
        self.classifier_pooling = classifier_pooling


# model_type -> HuggingFaceFamily; each family's module adds its own on import.
HUGGINGFACE_FAMILIES = {}


def register_huggingface_family(
    model_type: str,
    read_config: Callable,
    loader: Callable,
    write_config: Callable | None = None,
    architectures: dict | None = None,
    head_names: tuple = (),
    classifier_pooling: str = "pooler",
) -> Callable:
    """Make `load_encoder`, `read_huggingface_folder` and `encoder_config_from_huggingface` know a
    model_type, and `save_huggingface` write it where `write_config` and `architectures` are given
    (`head_names`: the family's own task-head tensor names, written without the base model's prefix;
    `classifier_pooling`: what its sequence classifier reads, the default of a new task head over it)."""
    HUGGINGFACE_FAMILIES[model_type] = HuggingFaceFamily(
        model_type, read_config, loader, write_config, architectures, head_names, classifier_pooling
    )
    return loader


def encoder_config_from_huggingface(hf_config: dict, source: str = "config.json") -> EncoderConfig:
    """An EncoderConfig from a Hugging Face `config.json` dict of any registered model_type."""
    model_type = hf_config.get("model_type", "bert")
    family = HUGGINGFACE_FAMILIES.get(model_type)
    if family is None:
        raise ValueError(
            f"{source}: model_type {model_type!r} is not supported; supported: {', '.join(sorted(HUGGINGFACE_FAMILIES))}."
        )
    return family.read_config(hf_config, source)


def require_keys(hf_config, keys, source):
    missing = [key for key in keys if key not in hf_config]
    if missing:
        raise ValueError(f"{source} lacks required keys: {', '.join(missing)}.")


def config_from_fields(fields, source):
    try:
        return EncoderConfig(**fields)
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def bert_config_fields(hf_config, source):
    """EncoderConfig fields from a BERT-layout `config.json` (BERT, and families that kept its names)."""
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(f"{source}: position_embedding_type {position_type!r} is not supported; expected 'absolute'.")
    required = ("vocab_size", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")
    return renamed_fields(hf_config, BERT_CONFIG_KEYS, required, source)


def config_keys_of(config, keys):
    """The `config.json` entries of an EncoderConfig under the names `keys` maps (config key ->
    field): what `renamed_fields` reads, written back."""
    return {key: getattr(config, field) for key, field in keys.items()}


def config_writer(write):
    """A family's `write_config(encoder, pad_id)` from `write(EncoderConfig, pad_id)`: the families
    whose config.json says nothing the EncoderConfig does not hold."""

    def write_config(encoder, pad_id=None):
        return write(encoder.config, pad_id)

    return write_config


def bert_config_to_huggingface(config, pad_id=None):
    """BERT's `config.json` keys of an EncoderConfig."""
    return {
        **config_keys_of(config, BERT_CONFIG_KEYS),
        "position_embedding_type": "absolute",
        "pad_token_id": 0 if pad_id is None else pad_id,
    }


def rotary_bert_config_to_huggingface(config, pad_id=None):
    """BERT's keys of an encoder with rotary positions instead of a position table (GTE,
    NomicBERT): no `position_embedding_type`, the base in `rope_parameters`."""
    hf_config = bert_config_to_huggingface(config, pad_id)
    del hf_config["position_embedding_type"]
    return {**hf_config, "rope_parameters": {"rope_theta": float(config.rotary_theta), "rope_type": "default"}}


def renamed_fields(hf_config, keys, required, source):
    """EncoderConfig fields from a `config.json` dict whose names `keys` maps (config key ->
    field), the `required` keys checked present, and the output projection's tie."""
    require_keys(hf_config, required, source)
    fields = {field: hf_config[key] for key, field in keys.items() if key in hf_config}
    fields["tie_word_embeddings"] = tied_output(hf_config)
    return fields


# The names transformers gives its base models inside task checkpoints (`bert.` in BertForPreTraining).
BASE_MODEL_PREFIXES = (
    "bert.",
    "roberta.",
    "electra.",
    "albert.",
    "distilbert.",
    "transformer.",
    "deberta.",
    "gte.",
    "nomic_bert.",
)


def start_loading(path, model_type, prefix, encoder_class, dtype, name="encoder", encoder_settings=None, own_names=()):
    """What every loader begins with: the folder read and checked (`read_huggingface_folder`), the
    base model's `prefix` taken off the tensor names (a tuple: the names a family's folders use,
    GTE's "gte." and "new."), the encoder built from the config (and, where its class takes
    arguments no `EncoderConfig` field holds, `encoder_settings(config.json dict, source)`'s), and
    an empty `WeightMap`. `own_names`: the family base model's own top-level names that another
    family uses as its prefix (DistilBERT's `transformer.`, XLNet's base model), which a base-model
    folder (`XModel.save_pretrained`: no prefix) starts with. Returns (config.json dict, tensors,
    encoder, weights)."""
    hf_config, config, tensors, weights_path = read_huggingface_folder(path, model_type)
    prefixes = (prefix,) if isinstance(prefix, str) else tuple(prefix)
    mine = prefixes + tuple(own_names)
    foreign = sorted({p for name in tensors for p in BASE_MODEL_PREFIXES if name.startswith(p) and p not in mine})
    if foreign:
        raise ValueError(
            f"{weights_path}: config.json says model_type {hf_config.get('model_type', 'bert')!r}, but its tensors are "
            f"named {foreign[0]}* (another family's base model): the config does not belong to these weights."
        )
    tensors = base_model_tensors(tensors, prefixes)
    settings = encoder_settings(hf_config, os.path.join(path, "config.json")) if encoder_settings else {}
    encoder = encoder_class.from_encoder_config(config, dtype=dtype, name=name, **settings)
    return hf_config, tensors, encoder, WeightMap(tensors, weights_path)


def tied_output(hf_config):
    """Whether the checkpoint's LM head projects with the word embedding's transpose
    (transformers' `tie_word_embeddings`, true unless a config says otherwise)."""
    tied = hf_config.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise ValueError(
            f"config.json: tie_word_embeddings must be true or false, got {tied!r} ({type(tied).__name__})."
        )
    return tied


def add_output_projection(weights, encoder, output_key, embedding_key):
    """An LM head's output matrix `output_key` (torch `[V, E]`): untied (`tie_word_embeddings`
    false), the token embedding's own `reverse_embeddings` `[E, V]`; tied, checked to be the
    word embedding `embedding_key`, as a checkpoint whose config says tied must hold."""
    if not encoder.config.tie_word_embeddings:
        weights.add(encoder.token_embedding.reverse_embeddings, output_key, transposed)
        return
    tensors = weights.tensors
    if (
        output_key in tensors
        and embedding_key in tensors
        and not np.array_equal(tensors[output_key], tensors[embedding_key])
    ):
        raise ValueError(
            f"{weights.source}: config.json says tie_word_embeddings (true unless set) but {output_key} differs from "
            f"{embedding_key}; loaded tied, the LM head's logits would be wrong. If the checkpoint was trained "
            'untied, set "tie_word_embeddings": false in its config.json.'
        )


def bert_config(hf_config, source):
    return config_from_fields(bert_config_fields(hf_config, source), source)


# A vocab.txt a caller has read already ((absolute path, bytes)): `load_checkpoint` reads each
# tokenizer file once and hands the family loader's size check those bytes, not the file again.
_VOCABULARY_READ = contextvars.ContextVar("vocabulary_read", default=None)


@contextlib.contextmanager
def vocabulary_read(path: str, data: bytes | None):
    """Within it, `read_huggingface_folder` counts the vocab.txt at `path` from `data`, its bytes
    read already (None: from the file, as without it)."""
    token = _VOCABULARY_READ.set(None if data is None else (os.path.abspath(path), data))
    try:
        yield
    finally:
        _VOCABULARY_READ.reset(token)


def _read_vocabulary_size(path):
    read = _VOCABULARY_READ.get()
    if read is not None and read[0] == os.path.abspath(path):
        # Counted as the file would be: universal newlines, a line an entry.
        return sum(1 for _ in io.StringIO(read[1].decode("utf-8"), newline=None))
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def transposed(array):
    return array.T


def read_huggingface_folder(path, model_type):
    """(config.json dict, EncoderConfig, {name: array}, weights path) of a checkpoint folder,
    each file checked: present, readable, of `model_type` (a name, or a tuple of the names one
    loader reads), with a vocab.txt (if any) that fits. The arrays are read from the weights
    file when looked up (`checkpoint_tensors.read_safetensors`), not held."""
    config_path = os.path.join(path, "config.json")
    weights_path = os.path.join(path, "model.safetensors")
    if not os.path.isdir(path):
        raise not_found(path, "Hugging Face checkpoint folder")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{path} has no config.json.")
    if not os.path.isfile(weights_path) and Probe.active is None:
        hint = ""
        if os.path.isfile(os.path.join(path, "pytorch_model.bin")):
            hint = " It has pytorch_model.bin: save it as safetensors first (torch is not a dependency)."
        raise FileNotFoundError(f"{path} has no model.safetensors.{hint}")
    hf_config = read_json_object(config_path)
    config = encoder_config_from_huggingface(hf_config, source=config_path)
    found = hf_config.get("model_type", "bert")
    expected = (model_type,) if isinstance(model_type, str) else tuple(model_type)
    if found not in expected:
        raise ValueError(
            f"{config_path}: model_type {found!r} is not a {' or '.join(expected)} checkpoint; use {HUGGINGFACE_FAMILIES[found].loader.__name__}."
        )

    check_tokenizer_files(path, found, source=config_path)
    vocab_path = os.path.join(path, "vocab.txt")
    if os.path.isfile(vocab_path):
        vocab_size = _read_vocabulary_size(vocab_path)
        if vocab_size != config.vocabulary_size:
            raise ValueError(
                f"{vocab_path} has {vocab_size} entries but {config_path} says vocab_size "
                f"{config.vocabulary_size}: the vocabulary does not belong to this checkpoint."
            )

    if Probe.active is not None:  # a model being saved: its map is read, not a file
        return hf_config, config, Probe.active.tensors, weights_path
    try:
        tensors = read_safetensors(weights_path)
    except (OSError, ValueError) as error:
        raise ValueError(f"{weights_path} is not a readable safetensors file: {error}") from None
    return hf_config, config, with_current_names(tensors), weights_path


# The norms' names of TensorFlow-era checkpoints, which transformers still writes at times (5.3
# saved a BERT so under sentence-transformers 5.3 and PyLate) and renames on load (its "legacy"
# conversion mapping): read so here too.
LEGACY_NAMES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))


def with_current_names(tensors):
    """`tensors` with the legacy norm names (`LayerNorm.gamma` / `.beta`) read as transformers reads
    them (`.weight` / `.bias`)."""
    if not any(old in name for name in tensors for old, _ in LEGACY_NAMES):
        return tensors

    def current(name):
        for old, new in LEGACY_NAMES:
            name = name.replace(old, new)
        return name

    return renamed(tensors, current)


def add_norms_and_feed_forward(weights, block, attention_norm, inner, outer, output_norm):
    """A block's two LayerNorms and feed-forward layers (both block kinds name them alike),
    under their checkpoint names (torch Linear weights are [out, in]: transposed)."""
    weights.add(block.attention_layer_norm.gamma, attention_norm + ".weight")
    weights.add(block.attention_layer_norm.beta, attention_norm + ".bias")
    weights.add(block.intermediate_dense.kernel, inner + ".weight", transposed)
    weights.add(block.intermediate_dense.bias, inner + ".bias")
    weights.add(block.output_dense.kernel, outer + ".weight", transposed)
    weights.add(block.output_dense.bias, outer + ".bias")
    weights.add(block.output_layer_norm.gamma, output_norm + ".weight")
    weights.add(block.output_layer_norm.beta, output_norm + ".bias")


def add_embeddings(weights, embeddings, prefix="embeddings.", positions=lambda table: table, norm=None):
    """The token, segment and position tables (where the model has them) and the norm after them,
    under transformers' names (`norm`: the norm's name where a layout moved it, NomicBERT's
    "emb_ln"); `positions` picks the rows a family's position ids use."""
    weights.add(embeddings.token_embedding.embeddings, prefix + "word_embeddings.weight")
    if embeddings.segment_embedding is not None:
        weights.add(embeddings.segment_embedding.embeddings, prefix + "token_type_embeddings.weight")
    if embeddings.position_embedding is not None:
        weights.add(embeddings.position_embedding.embeddings, prefix + "position_embeddings.weight", positions)
    add_norm(weights, embeddings.layer_norm, norm or prefix + "LayerNorm")


def add_output_bias(weights, head, key):
    """An LM head's output bias `key`, or zeros where the checkpoint's decoder has none
    (`decoder_bias` / `mlp_bias` false: its logits have no offset)."""
    if key in weights.tensors:
        weights.add(head.output_bias, key)
    else:
        weights.fix(head.output_bias, np.zeros(head.output_bias.shape), f"the LM head's output bias (no {key})")


def add_attention(weights, attention, config, query, key, value, output):
    """An attention layer's four projections from torch Linear weights (`[out, in]`; ours are
    `[in, heads, head_size]` and `[heads, head_size, out]`), each name without ".weight"; keys and
    values in the attention's own number of heads (fewer under grouped-query attention), biases
    where it has them."""
    head_size, hidden = config.head_size, config.hidden_size
    for name, dense in ((query, attention.query_dense), (key, attention.key_dense), (value, attention.value_dense)):
        heads = dense.kernel.shape[1]
        weights.add(
            dense.kernel,
            name + ".weight",
            lambda w, heads=heads: w.T.reshape(hidden, heads, head_size),
            shape=(heads * head_size, hidden),
        )
        if attention.use_bias:
            weights.add(
                dense.bias,
                name + ".bias",
                lambda b, heads=heads: b.reshape(heads, head_size),
                shape=(heads * head_size,),
            )
    heads = config.num_heads
    weights.add(
        attention.output_dense.kernel,
        output + ".weight",
        lambda w: w.T.reshape(heads, head_size, hidden),
        shape=(hidden, heads * head_size),
    )
    if attention.use_bias:
        weights.add(attention.output_dense.bias, output + ".bias")


def add_lm_transform(weights, head, dense, layer_norm, bias):
    """A `MaskedLMHead`'s transform, LayerNorm and output bias under a checkpoint's names."""
    weights.add(head.transform_dense.kernel, dense + ".weight", transposed)
    weights.add(head.transform_dense.bias, dense + ".bias")
    weights.add(head.layer_norm.gamma, layer_norm + ".weight")
    weights.add(head.layer_norm.beta, layer_norm + ".bias")
    weights.add(head.output_bias, bias)


def output_bias_key(tensors, head):
    """The bias an LM head `head` ("lm_head", "predictions") adds: its decoder's, which
    transformers' forward uses, where the file has one (untied heads keep it apart from
    `head.bias`; tied ones hold the same values under both names)."""
    return f"{head}.decoder.bias" if f"{head}.decoder.bias" in tensors else f"{head}.bias"


def is_token_classifier(hf_config):
    """Whether the folder's config names a transformers `...ForTokenClassification` (its
    `architectures`): the `classifier` tensors are then a tag per token, not a class per text."""
    return any(str(name).endswith("ForTokenClassification") for name in hf_config.get("architectures") or ())


def label_names(hf_config, count):
    """The label names of a classifier folder of `count` labels (its config's `id2label`)."""
    labels = {int(i): str(name) for i, name in hf_config.get("id2label", {}).items()}
    return [labels.get(i, f"LABEL_{i}") for i in range(count)]


def with_task_head(model, hf_config, weights, output, pooler=None):
    """`model` (an encoder) under the task head the folder holds: a `TokenClassifier` where the
    config names a `...ForTokenClassification` (transformers' `classifier` over every token, the
    config's `id2label` as its `tag_names`); a `SequenceClassifier` where the folder holds
    transformers' sequence-classification head: its output layer `output` (a name without
    ".weight"), and, where the head has its own dense layer over the summary token (`pooler`:
    RoBERTa's `classifier.dense`, DistilBERT's `pre_classifier`), that layer as the encoder's
    pooler, the config's `id2label` as its labels. Returns `model` unchanged otherwise."""
    if is_token_classifier(hf_config):
        from bertlayers.models.token_classifier import TokenClassifier

        count = weights.tensors["classifier.weight"].shape[0] if "classifier.weight" in weights.tensors else None
        if count is None:
            raise ValueError(
                f"{weights.source}: config.json names a token classifier but the file has no classifier.weight."
            )
        tagger = TokenClassifier(model, count, tag_names=label_names(hf_config, count))
        weights.add(tagger.head.dense.kernel, "classifier.weight", transposed)
        weights.add(tagger.head.dense.bias, "classifier.bias")
        return tagger
    if output + ".weight" not in weights.tensors:
        return model
    from bertlayers.models.sequence_classifier import SequenceClassifier

    count = weights.tensors[output + ".weight"].shape[0]
    classifier = SequenceClassifier(model, count, label_names=label_names(hf_config, count) if count > 1 else None)
    if pooler is not None:
        weights.add(model.pooler.dense.kernel, pooler + ".weight", transposed)
        weights.add(model.pooler.dense.bias, pooler + ".bias")
    weights.add(classifier.head.output_dense.kernel, output + ".weight", transposed)
    weights.add(classifier.head.output_dense.bias, output + ".bias")
    return classifier


def base_model_tensors(tensors, prefixes):
    """`tensors` with the base model's prefix (one of `prefixes`: "bert.", GTE's "gte." or
    "new.") taken off their names; the first prefix is the one a saved model's base tensors get
    (recorded for `save_huggingface` while a `Probe` is active)."""
    prefixes = (prefixes,) if isinstance(prefixes, str) else tuple(prefixes)
    if Probe.active is not None:
        Probe.active.prefix = prefixes[0]
    for prefix in prefixes:
        tensors = without_prefix(tensors, prefix)
    return tensors


def without_prefix(tensors, prefix):
    """`tensors` with the base model's `prefix` ("bert.", "roberta.") taken off its names."""
    return renamed(tensors, lambda key: key[len(prefix) :] if key.startswith(prefix) else key)


def map_encoder_weights(encoder, config, weights, pooler=True, positions=lambda table: table):
    """Add every encoder variable's checkpoint name (transformers' BertModel layout) to `weights`."""
    add_embeddings(weights, encoder.embeddings, positions=positions)
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"encoder.layer.{index}."
        self_attention = prefix + "attention.self."
        add_attention(
            weights,
            block.attention_layer,
            config,
            self_attention + "query",
            self_attention + "key",
            self_attention + "value",
            prefix + "attention.output.dense",
        )
        add_norms_and_feed_forward(
            weights,
            block,
            prefix + "attention.output.LayerNorm",
            prefix + "intermediate.dense",
            prefix + "output.dense",
            prefix + "output.LayerNorm",
        )

    if pooler:
        weights.add(encoder.pooler.dense.kernel, "pooler.dense.weight", transposed)
        weights.add(encoder.pooler.dense.bias, "pooler.dense.bias")


def _chunk(array, part, parts):
    """Rows `part` of `parts` equal parts of a fused torch tensor (axis 0: its outputs)."""
    size = array.shape[0] // parts
    return array[part * size : (part + 1) * size]


def add_linear(weights, dense, key, part=0, parts=1):
    """A torch Linear `key` (`.weight` `[out, in]`, `.bias` where `dense` has one) into a Keras
    `Dense`; with `parts` > 1, chunk `part` of a Linear that fuses several (ModernBERT's `Wi`)."""
    inputs, outputs = dense.kernel.shape
    weights.add(dense.kernel, key + ".weight", lambda w: _chunk(w, part, parts).T, shape=(parts * outputs, inputs))
    if dense.use_bias:
        weights.add(dense.bias, key + ".bias", lambda b: _chunk(b, part, parts), shape=(parts * outputs,))


def add_norm(weights, norm, key):
    """A torch LayerNorm or RMSNorm `key` into a Keras norm (`.bias` where it centers)."""
    weights.add(norm.gamma if hasattr(norm, "gamma") else norm.scale, key + ".weight")  # RMSNorm: scale
    if getattr(norm, "center", False):
        weights.add(norm.beta, key + ".bias")


def add_decoder_block(weights, block, config, layer):
    """A pre-norm block in Llama's layout under `layer` ("layers.3."): `self_attn.q/k/v/o_proj`
    (and `q_norm`/`k_norm` where its attention normalizes queries and keys), `input_layernorm`,
    `mlp.gate/up/down_proj`, `post_attention_layernorm`."""
    attention = layer + "self_attn."
    add_attention(
        weights,
        block.attention_layer,
        config,
        attention + "q_proj",
        attention + "k_proj",
        attention + "v_proj",
        attention + "o_proj",
    )
    if getattr(block.attention_layer, "query_norm", None) is not None:
        add_norm(weights, block.attention_layer.query_norm, attention + "q_norm")
        add_norm(weights, block.attention_layer.key_norm, attention + "k_norm")
    add_norm(weights, block.attention_layer_norm, layer + "input_layernorm")
    feed_forward = block.feed_forward_layer
    add_linear(weights, feed_forward.gate_dense, layer + "mlp.gate_proj")
    add_linear(weights, feed_forward.up_dense, layer + "mlp.up_proj")
    add_linear(weights, feed_forward.output_dense, layer + "mlp.down_proj")
    add_norm(weights, block.output_layer_norm, layer + "post_attention_layernorm")


def decoder_config_keys(config):
    """The `config.json` keys Llama-layout families share (sizes, heads, activation, norm, rotary base)."""
    return {
        "vocab_size": config.vocabulary_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_key_value_heads or config.num_heads,
        "head_dim": config.head_size,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.activation,
        "attention_dropout": config.attention_dropout,
        "max_position_embeddings": config.max_sequence_length,
        "rms_norm_eps": config.layer_norm_epsilon,
        "initializer_range": config.initializer_range,
        # One base for all layers; a family of per-kind bases writes its own.
        **(
            {"rope_parameters": {"rope_theta": float(config.rotary_theta), "rope_type": "default"}}
            if config.rotary_theta is not None
            else {}
        ),
    }


def add_fused_attention(weights, attention, config, fused, output):
    """An attention layer from a torch Linear `fused` whose `[3H, H]` weight stacks the query, key
    and value projections (ModernBERT's `Wqkv`, GTE's `qkv_proj`) and the output Linear `output`."""
    heads, head_size, hidden = config.num_heads, config.head_size, config.hidden_size
    for part, dense in enumerate((attention.query_dense, attention.key_dense, attention.value_dense)):
        weights.add(
            dense.kernel,
            fused + ".weight",
            lambda w, part=part: _chunk(w, part, 3).T.reshape(hidden, heads, head_size),
            shape=(3 * heads * head_size, hidden),
        )
        if attention.use_bias:
            weights.add(
                dense.bias,
                fused + ".bias",
                lambda b, part=part: _chunk(b, part, 3).reshape(heads, head_size),
                shape=(3 * heads * head_size,),
            )
    weights.add(
        attention.output_dense.kernel,
        output + ".weight",
        lambda w: w.T.reshape(heads, head_size, hidden),
        shape=(hidden, heads * head_size),
    )
    if attention.use_bias:
        weights.add(attention.output_dense.bias, output + ".bias")


def rotary_theta(hf_config, source, default):
    """The rotary base of a one-kind config: `rope_parameters.rope_theta` (transformers 5), the
    older `rope_theta` / `rotary_emb_base`, else the family's `default`; scaled rotations refused."""
    parameters = hf_config.get("rope_parameters") or {}
    if parameters.get("rope_type", "default") != "default" or hf_config.get("rope_scaling"):
        raise ValueError(
            f"{source}: rope_parameters has rope_type {parameters.get('rope_type')!r} (or rope_scaling is set); only "
            "the default rotation (no scaling) is supported."
        )
    theta = parameters.get("rope_theta", hf_config.get("rope_theta", hf_config.get("rotary_emb_base", default)))
    return float(theta)
