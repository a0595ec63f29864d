"""Load the original google-research/bert and google-research/albert TF1 checkpoints."""

import json
import os

from bertlayers.convert.huggingface import BERT_CONFIG_KEYS
from bertlayers.convert.weight_map import WeightMap
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.networks.albert_encoder import AlbertEncoder
from bertlayers.networks.bert_encoder import BertEncoder
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

# bert_config.json's keys, and albert_config.json's two more.
_CONFIG_KEYS = {**BERT_CONFIG_KEYS, "embedding_size": "embedding_size", "num_hidden_groups": "num_layer_groups"}
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
        raise ValueError(f"{path}: inner_group_num {raw['inner_group_num']} is not supported (ALBERT's releases use 1).")
    fields = {field: raw[key] for key, field in _CONFIG_KEYS.items() if key in raw}
    try:
        return EncoderConfig(architecture=architecture, **fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None


def _read_checkpoint(prefix):
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as error:
        raise ValueError(f"Cannot read a TF checkpoint at {prefix}: {error}") from None
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _transposed(array):
    return array.T


def _map_heads(pretrainer, weights):
    head = pretrainer.lm_head
    weights.add(head.transform_dense.kernel, "cls/predictions/transform/dense/kernel")
    weights.add(head.transform_dense.bias, "cls/predictions/transform/dense/bias")
    weights.add(head.layer_norm.gamma, "cls/predictions/transform/LayerNorm/gamma")
    weights.add(head.layer_norm.beta, "cls/predictions/transform/LayerNorm/beta")
    weights.add(head.output_bias, "cls/predictions/output_bias")
    nsp = pretrainer.next_sentence_head.output_dense
    weights.add(nsp.kernel, "cls/seq_relationship/output_weights", _transposed)  # stored [2, H]
    weights.add(nsp.bias, "cls/seq_relationship/output_bias")


def _map_attention(block, prefix, config, weights):
    heads, head_size, hidden = config.num_heads, config.head_size, config.hidden_size
    attention = block.attention_layer
    for name, dense in (("query", attention.query_dense), ("key", attention.key_dense), ("value", attention.value_dense)):
        weights.add(dense.kernel, f"{prefix}/self/{name}/kernel", lambda w: w.reshape(hidden, heads, head_size))
        weights.add(dense.bias, f"{prefix}/self/{name}/bias", lambda b: b.reshape(heads, head_size))
    weights.add(attention.output_dense.kernel, f"{prefix}/output/dense/kernel", lambda w: w.reshape(heads, head_size, hidden))
    weights.add(attention.output_dense.bias, f"{prefix}/output/dense/bias")


def _map_dense(layer, prefix, weights):
    weights.add(layer.kernel, f"{prefix}/kernel")
    weights.add(layer.bias, f"{prefix}/bias")


def _map_layer_norm(layer, prefix, weights):
    weights.add(layer.gamma, f"{prefix}/gamma")
    weights.add(layer.beta, f"{prefix}/beta")


def _map_embeddings(encoder, weights):
    embeddings = encoder.embeddings
    weights.add(embeddings.token_embedding.embeddings, "bert/embeddings/word_embeddings")
    weights.add(embeddings.segment_embedding.embeddings, "bert/embeddings/token_type_embeddings")
    weights.add(embeddings.position_embedding.embeddings, "bert/embeddings/position_embeddings")
    _map_layer_norm(embeddings.layer_norm, "bert/embeddings/LayerNorm", weights)
    _map_dense(encoder.pooler.dense, "bert/pooler/dense", weights)


def _load(checkpoint_prefix, config_path, architecture, map_encoder, pretrainer, dtype):
    config = _read_config(config_path, architecture)
    tensors = _read_checkpoint(checkpoint_prefix)
    encoder_cls = AlbertEncoder if architecture == "albert" else BertEncoder
    encoder = encoder_cls.from_encoder_config(config, dtype=dtype, name="encoder")
    model = BertPretrainer(encoder) if pretrainer else encoder
    weights = WeightMap(tensors, checkpoint_prefix)
    _map_embeddings(encoder, weights)
    map_encoder(encoder, config, weights)
    if pretrainer:
        _map_heads(model, weights)
    weights.apply(ignore=_TRAINING_STATE)
    return model


def _map_bert_layers(encoder, config, weights):
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{index}"
        _map_attention(block, f"{prefix}/attention", config, weights)
        _map_layer_norm(block.attention_layer_norm, f"{prefix}/attention/output/LayerNorm", weights)
        _map_dense(block.intermediate_dense, f"{prefix}/intermediate/dense", weights)
        _map_dense(block.output_dense, f"{prefix}/output/dense", weights)
        _map_layer_norm(block.output_layer_norm, f"{prefix}/output/LayerNorm", weights)


def _map_albert_layers(encoder, config, weights):
    _map_dense(encoder.embeddings.embedding_projection, "bert/encoder/embedding_hidden_mapping_in", weights)
    for group, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/transformer/group_{group}/inner_group_0"
        _map_attention(block, f"{prefix}/attention_1", config, weights)
        _map_layer_norm(block.attention_layer_norm, f"{prefix}/LayerNorm", weights)
        _map_dense(block.intermediate_dense, f"{prefix}/ffn_1/intermediate/dense", weights)
        _map_dense(block.output_dense, f"{prefix}/ffn_1/intermediate/output/dense", weights)
        _map_layer_norm(block.output_layer_norm, f"{prefix}/LayerNorm_1", weights)


def load_google_bert(checkpoint_prefix, bert_config_json, pretrainer=True, dtype=None):
    """A `BertPretrainer` (or, with `pretrainer=False`, a `BertEncoder`) from an original
    google-research/bert TF1 checkpoint (`bert_model.ckpt` prefix + `bert_config.json`).

    Optimizer slots and the global step are skipped; any other checkpoint tensor the model
    does not use is reported in a warning, and missing or mis-shaped tensors raise a
    `CheckpointMismatchError` listing all of them.
    """
    return _load(checkpoint_prefix, bert_config_json, "bert", _map_bert_layers, pretrainer, dtype)


def load_google_albert(checkpoint_prefix, albert_config_json, pretrainer=True, dtype=None):
    """The same for google-research/albert TF1 checkpoints (shared layer groups)."""
    return _load(checkpoint_prefix, albert_config_json, "albert", _map_albert_layers, pretrainer, dtype)
