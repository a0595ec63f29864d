"""Load Hugging Face BERT checkpoints (`config.json` + `model.safetensors`), without torch."""

import json
import os

from bertlayers.convert.weight_map import WeightMap
from bertlayers.networks.bert_encoder import BertEncoder
from bertlayers.networks.encoder_config import EncoderConfig

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
_IGNORED = (r"position_ids$",)


def encoder_config_from_huggingface(hf_config, source="config.json"):
    """An EncoderConfig from a Hugging Face BERT `config.json` dict."""
    model_type = hf_config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"{source}: model_type {model_type!r} is not supported; expected 'bert'.")
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"{source}: position_embedding_type {position_type!r} is not supported; expected 'absolute'."
        )
    missing = [key for key in ("vocab_size", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size") if key not in hf_config]
    if missing:
        raise ValueError(f"{source} lacks required keys: {', '.join(missing)}.")
    fields = {field: hf_config[key] for key, field in BERT_CONFIG_KEYS.items() if key in hf_config}
    try:
        return EncoderConfig(**fields)
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def _read_vocabulary_size(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def _transposed(array):
    return array.T


def load_huggingface_bert(path, dtype=None, name="bert_encoder"):
    """Build a `BertEncoder` from a Hugging Face BERT checkpoint folder.

    Args:
      path: a folder with `config.json` and `model.safetensors` (a `BertModel`, or a model
        whose encoder tensors carry a `bert.` prefix, such as `BertForPreTraining`).
      dtype: dtype policy of the encoder, e.g. "mixed_bfloat16"; weights stay float32.
      name: the encoder's name.

    Returns:
      A `BertEncoder` whose outputs match transformers' `BertModel` (`sequence_output` ↔
      `last_hidden_state`, `pooled_output` ↔ `pooler_output`).

    Raises:
      FileNotFoundError: a required file is missing.
      ValueError: an unsupported or invalid config, a corrupt weights file, a `vocab.txt` whose
        size disagrees with the config, or (CheckpointMismatchError) tensors missing from the
        checkpoint or of the wrong shape, all listed.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    config_path = os.path.join(path, "config.json")
    weights_path = os.path.join(path, "model.safetensors")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"No Hugging Face checkpoint folder at {path}.")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{path} has no config.json.")
    if not os.path.isfile(weights_path):
        hint = ""
        if os.path.isfile(os.path.join(path, "pytorch_model.bin")):
            hint = " It has pytorch_model.bin: save it as safetensors first (torch is not a dependency)."
        raise FileNotFoundError(f"{path} has no model.safetensors.{hint}")
    try:
        with open(config_path, encoding="utf-8") as f:
            hf_config = json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_path} is not valid JSON: {error}") from None
    config = encoder_config_from_huggingface(hf_config, source=config_path)

    vocab_path = os.path.join(path, "vocab.txt")
    if os.path.isfile(vocab_path):
        vocab_size = _read_vocabulary_size(vocab_path)
        if vocab_size != config.vocabulary_size:
            raise ValueError(
                f"{vocab_path} has {vocab_size} entries but {config_path} says vocab_size "
                f"{config.vocabulary_size}: the vocabulary does not belong to this checkpoint."
            )

    try:
        tensors = load_file(weights_path)
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(f"{weights_path} is not a readable safetensors file: {error}") from None
    if any(key.startswith("bert.") for key in tensors):
        tensors = {key[len("bert."):] if key.startswith("bert.") else key: value for key, value in tensors.items()}

    encoder = BertEncoder.from_encoder_config(config, dtype=dtype, name=name)
    weights = WeightMap(tensors, weights_path)
    _map_bert_weights(encoder, config, weights)
    weights.apply(ignore=_IGNORED)
    return encoder


def _map_bert_weights(encoder, config, weights):
    heads, head_size, hidden = config.num_heads, config.head_size, config.hidden_size

    embeddings = encoder.embeddings
    weights.add(embeddings.token_embedding.embeddings, "embeddings.word_embeddings.weight")
    weights.add(embeddings.segment_embedding.embeddings, "embeddings.token_type_embeddings.weight")
    weights.add(embeddings.position_embedding.embeddings, "embeddings.position_embeddings.weight")
    weights.add(embeddings.layer_norm.gamma, "embeddings.LayerNorm.weight")
    weights.add(embeddings.layer_norm.beta, "embeddings.LayerNorm.bias")

    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"encoder.layer.{index}."
        attention = block.attention_layer
        for projection, dense in (
            ("query", attention.query_dense),
            ("key", attention.key_dense),
            ("value", attention.value_dense),
        ):
            # torch Linear stores [out, in]; our kernel is [in, heads, head_size].
            weights.add(
                dense.kernel,
                f"{prefix}attention.self.{projection}.weight",
                lambda w: w.T.reshape(hidden, heads, head_size),
            )
            weights.add(
                dense.bias, f"{prefix}attention.self.{projection}.bias", lambda b: b.reshape(heads, head_size)
            )
        weights.add(
            attention.output_dense.kernel,
            f"{prefix}attention.output.dense.weight",
            lambda w: w.T.reshape(heads, head_size, hidden),
        )
        weights.add(attention.output_dense.bias, f"{prefix}attention.output.dense.bias")
        weights.add(block.attention_layer_norm.gamma, f"{prefix}attention.output.LayerNorm.weight")
        weights.add(block.attention_layer_norm.beta, f"{prefix}attention.output.LayerNorm.bias")
        weights.add(block.intermediate_dense.kernel, f"{prefix}intermediate.dense.weight", _transposed)
        weights.add(block.intermediate_dense.bias, f"{prefix}intermediate.dense.bias")
        weights.add(block.output_dense.kernel, f"{prefix}output.dense.weight", _transposed)
        weights.add(block.output_dense.bias, f"{prefix}output.dense.bias")
        weights.add(block.output_layer_norm.gamma, f"{prefix}output.LayerNorm.weight")
        weights.add(block.output_layer_norm.beta, f"{prefix}output.LayerNorm.bias")

    weights.add(encoder.pooler.dense.kernel, "pooler.dense.weight", _transposed)
    weights.add(encoder.pooler.dense.bias, "pooler.dense.bias")
