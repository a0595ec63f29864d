"""Load Hugging Face BERT, ELECTRA and XLNet checkpoints (`config.json` + `model.safetensors`), without torch."""

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
# XLNet's config.json names; one dropout rate serves the hidden states and the attention.
XLNET_CONFIG_KEYS = {
    "vocab_size": "vocabulary_size",
    "n_layer": "num_layers",
    "d_model": "hidden_size",
    "n_head": "num_heads",
    "d_inner": "intermediate_size",
    "ff_activation": "activation",
    "dropout": "dropout",
    "layer_norm_eps": "layer_norm_epsilon",
    "initializer_range": "initializer_range",
}
MODEL_TYPES = ("bert", "electra", "xlnet")
LOADERS = {"bert": "load_huggingface_bert", "electra": "load_huggingface_electra", "xlnet": "load_huggingface_xlnet"}


def encoder_config_from_huggingface(hf_config, source="config.json"):
    """An EncoderConfig from a Hugging Face BERT or ELECTRA `config.json` dict."""
    model_type = hf_config.get("model_type", "bert")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"{source}: model_type {model_type!r} is not supported; expected one of {MODEL_TYPES}.")
    if model_type == "xlnet":
        return _xlnet_config(hf_config, source)
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"{source}: position_embedding_type {position_type!r} is not supported; expected 'absolute'."
        )
    missing = [key for key in ("vocab_size", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size") if key not in hf_config]
    if missing:
        raise ValueError(f"{source} lacks required keys: {', '.join(missing)}.")
    fields = {field: hf_config[key] for key, field in BERT_CONFIG_KEYS.items() if key in hf_config}
    if model_type == "electra":
        fields["embedding_size"] = hf_config.get("embedding_size", hf_config["hidden_size"])
    try:
        return EncoderConfig(**fields)
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def _xlnet_config(hf_config, source):
    missing = [key for key in ("vocab_size", "n_layer", "d_model", "n_head", "d_inner") if key not in hf_config]
    if missing:
        raise ValueError(f"{source} lacks required keys: {', '.join(missing)}.")
    if hf_config.get("attn_type", "bi") != "bi":
        raise ValueError(f"{source}: attn_type {hf_config['attn_type']!r} is not supported; expected 'bi'.")
    if hf_config.get("d_head", hf_config["d_model"] // hf_config["n_head"]) * hf_config["n_head"] != hf_config["d_model"]:
        raise ValueError(f"{source}: d_head x n_head must equal d_model.")
    fields = {field: hf_config[key] for key, field in XLNET_CONFIG_KEYS.items() if key in hf_config}
    fields["attention_dropout"] = fields.get("dropout", 0.1)
    # Segments 0 and 1, and 2 for XLNet's [CLS]; no position table, so the limit is ours.
    fields.update(architecture="xlnet", type_vocab_size=3)
    try:
        return EncoderConfig(**fields)
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def _read_vocabulary_size(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def _transposed(array):
    return array.T


def read_huggingface_folder(path, model_type):
    """(config.json dict, EncoderConfig, {name: array}, weights path) of a checkpoint folder,
    each file checked: present, readable, of `model_type`, with a vocab.txt (if any) that fits."""
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
    found = hf_config.get("model_type", "bert")
    if found != model_type:
        raise ValueError(f"{config_path}: model_type {found!r} is not a {model_type} checkpoint; use {LOADERS[found]}.")

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
    return hf_config, config, tensors, weights_path


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
    hf_config, config, tensors, weights_path = read_huggingface_folder(path, "bert")
    if any(key.startswith("bert.") for key in tensors):
        tensors = {key[len("bert."):] if key.startswith("bert.") else key: value for key, value in tensors.items()}

    encoder = BertEncoder.from_encoder_config(config, dtype=dtype, name=name)
    weights = WeightMap(tensors, weights_path)
    map_encoder_weights(encoder, config, weights)
    weights.apply(ignore=_IGNORED)
    return encoder


def _add_norms_and_feed_forward(weights, block, attention_norm, inner, outer, output_norm):
    """A block's two LayerNorms and feed-forward layers (both block kinds name them alike),
    under their checkpoint names (torch Linear weights are [out, in]: transposed)."""
    weights.add(block.attention_layer_norm.gamma, attention_norm + ".weight")
    weights.add(block.attention_layer_norm.beta, attention_norm + ".bias")
    weights.add(block.intermediate_dense.kernel, inner + ".weight", _transposed)
    weights.add(block.intermediate_dense.bias, inner + ".bias")
    weights.add(block.output_dense.kernel, outer + ".weight", _transposed)
    weights.add(block.output_dense.bias, outer + ".bias")
    weights.add(block.output_layer_norm.gamma, output_norm + ".weight")
    weights.add(block.output_layer_norm.beta, output_norm + ".bias")


def map_encoder_weights(encoder, config, weights, pooler=True):
    """Add every encoder variable's checkpoint name (transformers' BertModel layout) to `weights`."""
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
        _add_norms_and_feed_forward(
            weights,
            block,
            prefix + "attention.output.LayerNorm",
            prefix + "intermediate.dense",
            prefix + "output.dense",
            prefix + "output.LayerNorm",
        )

    if pooler:
        weights.add(encoder.pooler.dense.kernel, "pooler.dense.weight", _transposed)
        weights.add(encoder.pooler.dense.bias, "pooler.dense.bias")


def load_huggingface_electra(path, dtype=None):
    """Build an ELECTRA model from a Hugging Face ELECTRA checkpoint folder.

    Args:
      path: a folder with `config.json` (`model_type` "electra") and `model.safetensors`:
        an `ElectraForPreTraining` (discriminator), an `ElectraForMaskedLM` (generator) or a
        bare `ElectraModel`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      An `ElectraDiscriminator` (outputs `rtd` ↔ transformers' `logits`, `sequence_output` ↔
      `last_hidden_state`), an `ElectraGenerator` (`mlm` ↔ `logits`), or, for a bare
      `ElectraModel`, its `BertEncoder`. The encoder (`.encoder`) fine-tunes like any other.

    Raises:
      As `load_huggingface_bert`.
    """
    from bertlayers.families.electra import ElectraDiscriminator, ElectraGenerator, electra_embeddings, electra_encoder

    _, config, tensors, weights_path = read_huggingface_folder(path, "electra")
    tensors = {key[len("electra."):] if key.startswith("electra.") else key: value for key, value in tensors.items()}
    encoder = electra_encoder(config, electra_embeddings(config, dtype), dtype=dtype, name="encoder")
    weights = WeightMap(tensors, weights_path)
    map_encoder_weights(encoder, config, weights, pooler=False)
    if encoder.embedding_projection is not None:
        weights.add(encoder.embedding_projection.kernel, "embeddings_project.weight", _transposed)
        weights.add(encoder.embedding_projection.bias, "embeddings_project.bias")

    if any(key.startswith("generator_predictions.") for key in tensors):
        model = ElectraGenerator(encoder)
        head = model.generator_head
        weights.add(head.transform_dense.kernel, "generator_predictions.dense.weight", _transposed)
        weights.add(head.transform_dense.bias, "generator_predictions.dense.bias")
        weights.add(head.layer_norm.gamma, "generator_predictions.LayerNorm.weight")
        weights.add(head.layer_norm.beta, "generator_predictions.LayerNorm.bias")
        weights.add(head.output_bias, "generator_lm_head.bias")
    elif any(key.startswith("discriminator_predictions.") for key in tensors):
        model = ElectraDiscriminator(encoder)
        head = model.discriminator_head
        weights.add(head.dense.kernel, "discriminator_predictions.dense.weight", _transposed)
        weights.add(head.dense.bias, "discriminator_predictions.dense.bias")
        weights.add(head.prediction.kernel, "discriminator_predictions.dense_prediction.weight", _transposed)
        weights.add(head.prediction.bias, "discriminator_predictions.dense_prediction.bias")
    else:
        model = encoder
    # The generator's output matrix is its word embedding (tied); a saved copy adds nothing.
    weights.apply(ignore=_IGNORED + (r"^generator_lm_head\.weight$",))
    return model


def load_huggingface_xlnet(path, dtype=None):
    """Build an XLNet model from a Hugging Face XLNet checkpoint folder.

    Args:
      path: a folder with `config.json` (`model_type` "xlnet") and `model.safetensors`: an
        `XLNetLMHeadModel`, a bare `XLNetModel`, or a task model whose `transformer.`
        tensors are the encoder (its `sequence_summary.summary` becomes the pooler).
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      For an `XLNetLMHeadModel`, an `XLNetPretrainer` (`plm` <-> transformers' `logits` given
      the same `perm_mask` and `target_mapping`); otherwise its `XLNetEncoder`
      (`sequence_output` <-> `XLNetModel`'s `last_hidden_state`), whose content stream
      fine-tunes like any encoder. `clamp_len` and `bi_data` come from the config; memory is
      left off (`XLNetEncoder(mem_len=...)` adds it, with the same weights).

    Raises:
      As `load_huggingface_bert`.
    """
    from bertlayers.families.xlnet import XLNetEncoder, XLNetPretrainer

    hf_config, config, tensors, weights_path = read_huggingface_folder(path, "xlnet")
    tensors = {key[len("transformer."):] if key.startswith("transformer.") else key: value for key, value in tensors.items()}
    encoder = XLNetEncoder.from_encoder_config(
        config,
        clamp_len=hf_config.get("clamp_len", -1),
        bidirectional_data=hf_config.get("bi_data", False),
        dtype=dtype,
        name="encoder",
    )
    weights = WeightMap(tensors, weights_path)
    weights.add(encoder.token_embedding.embeddings, "word_embedding.weight")
    weights.add(encoder.mask_embedding.embedding, "mask_emb", lambda w: w.reshape(-1))
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"layer.{index}."
        attention = block.attention
        # transformers keeps XLNet's [H, N, D] layout, which is ours.
        for variable, key in (
            (attention.query_kernel, "q"),
            (attention.key_kernel, "k"),
            (attention.value_kernel, "v"),
            (attention.output_kernel, "o"),
            (attention.position_kernel, "r"),
            (attention.content_bias, "r_w_bias"),
            (attention.position_bias, "r_r_bias"),
            (attention.segment_bias, "r_s_bias"),
            (attention.segment_embedding, "seg_embed"),
        ):
            weights.add(variable, f"{prefix}rel_attn.{key}")
        _add_norms_and_feed_forward(
            weights, block, prefix + "rel_attn.layer_norm", prefix + "ff.layer_1", prefix + "ff.layer_2", prefix + "ff.layer_norm"
        )
    if "sequence_summary.summary.weight" in tensors:
        weights.add(encoder.pooler.dense.kernel, "sequence_summary.summary.weight", _transposed)
        weights.add(encoder.pooler.dense.bias, "sequence_summary.summary.bias")

    model = encoder
    if "lm_loss.bias" in tensors:
        model = XLNetPretrainer(encoder)
        weights.add(model.lm_head.output_bias, "lm_loss.bias")
    # The LM head's matrix is the word embedding (tied); a task head's output layer is not ours.
    weights.apply(ignore=_IGNORED + (r"^lm_loss\.weight$", r"^logits_proj\.", r"^qa_outputs\.", r"^start_logits\.", r"^end_logits\.", r"^answer_class\."))
    return model
