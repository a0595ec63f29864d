"""Read the original google-research TF1 checkpoints (`bert_config.json` + `bert_model.ckpt`):
the config, the tensors, and the mapping of the scopes every such checkpoint shares (embeddings,
attention, dense, LayerNorm, the pretraining heads). Each family's layer layout and loader live
in its folder (`bertlayers.families.bert.load_google_bert`, `...albert.load_google_albert`)."""

import json
import os
from collections.abc import Callable

import keras

from bertlayers.convert.checkpoint_tensors import CheckpointTensors
from bertlayers.convert.huggingface import BERT_CONFIG_KEYS, transposed
from bertlayers.convert.weight_map import WeightMap
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

# bert_config.json's keys, and albert_config.json's two more.
CONFIG_KEYS = {**BERT_CONFIG_KEYS, "embedding_size": "embedding_size", "num_hidden_groups": "num_layer_groups"}
# Training state that checkpoints carry beside the model.
_TRAINING_STATE = (r"adam_m$", r"adam_v$", r"^global_step$", r"good_steps$", r"loss_scale$", r"/Adam(_1)?$")


def _read_config(path, architecture):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No config file at {path}.")
    with open(path, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from None
    if int(raw.get("inner_group_num", 1)) != 1:
        raise ValueError(
            f"{path}: inner_group_num {raw['inner_group_num']} is not supported (ALBERT's releases use 1)."
        )
    fields = {field: raw[key] for key, field in CONFIG_KEYS.items() if key in raw}
    try:
        return EncoderConfig(architecture=architecture, **fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None


def _read_checkpoint(prefix):
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as error:
        raise ValueError(f"Cannot read a TF checkpoint at {prefix}: {error}") from None
    return CheckpointTensors(reader.get_variable_to_shape_map(), reader.get_tensor)


def _map_heads(pretrainer, weights):
    head = pretrainer.lm_head
    weights.add(head.transform_dense.kernel, "cls/predictions/transform/dense/kernel")
    weights.add(head.transform_dense.bias, "cls/predictions/transform/dense/bias")
    weights.add(head.layer_norm.gamma, "cls/predictions/transform/LayerNorm/gamma")
    weights.add(head.layer_norm.beta, "cls/predictions/transform/LayerNorm/beta")
    weights.add(head.output_bias, "cls/predictions/output_bias")
    nsp = pretrainer.next_sentence_head.output_dense
    weights.add(nsp.kernel, "cls/seq_relationship/output_weights", transposed)  # stored [2, H]
    weights.add(nsp.bias, "cls/seq_relationship/output_bias")


def map_attention(block, prefix, config, weights):
    heads, head_size, hidden = config.num_heads, config.head_size, config.hidden_size
    attention = block.attention_layer
    for name, dense in (
        ("query", attention.query_dense),
        ("key", attention.key_dense),
        ("value", attention.value_dense),
    ):
        weights.add(dense.kernel, f"{prefix}/self/{name}/kernel", lambda w: w.reshape(hidden, heads, head_size))
        weights.add(dense.bias, f"{prefix}/self/{name}/bias", lambda b: b.reshape(heads, head_size))
    weights.add(
        attention.output_dense.kernel, f"{prefix}/output/dense/kernel", lambda w: w.reshape(heads, head_size, hidden)
    )
    weights.add(attention.output_dense.bias, f"{prefix}/output/dense/bias")


def map_dense(layer, prefix, weights):
    weights.add(layer.kernel, f"{prefix}/kernel")
    weights.add(layer.bias, f"{prefix}/bias")


def map_layer_norm(layer, prefix, weights):
    weights.add(layer.gamma, f"{prefix}/gamma")
    weights.add(layer.beta, f"{prefix}/beta")


def _map_embeddings(encoder, weights):
    embeddings = encoder.embeddings
    weights.add(embeddings.token_embedding.embeddings, "bert/embeddings/word_embeddings")
    weights.add(embeddings.segment_embedding.embeddings, "bert/embeddings/token_type_embeddings")
    weights.add(embeddings.position_embedding.embeddings, "bert/embeddings/position_embeddings")
    map_layer_norm(embeddings.layer_norm, "bert/embeddings/LayerNorm", weights)
    map_dense(encoder.pooler.dense, "bert/pooler/dense", weights)


def map_block(block, config, weights, attention, attention_norm, inner, outer, output_norm):
    """A block's attention, two LayerNorms and feed-forward layers under their TF1 scopes (the
    layouts differ by family only in the scope names)."""
    map_attention(block, attention, config, weights)
    map_layer_norm(block.attention_layer_norm, attention_norm, weights)
    map_dense(block.intermediate_dense, inner, weights)
    map_dense(block.output_dense, outer, weights)
    map_layer_norm(block.output_layer_norm, output_norm, weights)


def load_google_checkpoint(
    checkpoint_prefix: str,
    config_path: str,
    encoder_class: type,
    map_layers: Callable,
    pretrainer: bool,
    dtype: str | keras.DTypePolicy | None,
) -> keras.Model:
    """A `BertPretrainer` (or, with `pretrainer=False`, the encoder) of `encoder_class` from a TF1
    checkpoint, its blocks mapped by `map_layers(encoder, config, weights)`.

    Optimizer slots and the global step are skipped; any other checkpoint tensor the model
    does not use is reported in a warning, and missing or mis-shaped tensors raise a
    `CheckpointMismatchError` listing all of them.
    """
    config = _read_config(config_path, encoder_class.architecture)
    tensors = _read_checkpoint(checkpoint_prefix)
    encoder = encoder_class.from_encoder_config(config, dtype=dtype, name="encoder")
    model = BertPretrainer(encoder) if pretrainer else encoder
    weights = WeightMap(tensors, checkpoint_prefix)
    _map_embeddings(encoder, weights)
    map_layers(encoder, config, weights)
    if pretrainer:
        _map_heads(model, weights)
    weights.apply(ignore=_TRAINING_STATE)
    return model
