"""XLNet's Hugging Face checkpoints: transformers' `XLNetModel` / `XLNetLMHeadModel` folders."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_norms_and_feed_forward,
    add_output_projection,
    base_model_tensors,
    config_from_fields,
    config_keys_of,
    read_huggingface_folder,
    register_huggingface_family,
    renamed_fields,
    require_keys,
    transposed,
    with_task_head,
)
from bertlayers.convert.weight_map import WeightMap
from bertlayers.families.xlnet.encoder import XLNetEncoder
from bertlayers.families.xlnet.pretrainer import XLNetPretrainer

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


XLNET_REQUIRED_KEYS = ("vocab_size", "n_layer", "d_model", "n_head", "d_inner")


def xlnet_config_from_huggingface(hf_config, source):
    """An XLNet `EncoderConfig` from transformers' XLNet `config.json` dict."""
    require_keys(hf_config, XLNET_REQUIRED_KEYS, source)
    if hf_config.get("attn_type", "bi") != "bi":
        raise ValueError(f"{source}: attn_type {hf_config['attn_type']!r} is not supported; expected 'bi'.")
    if (
        hf_config.get("d_head", hf_config["d_model"] // hf_config["n_head"]) * hf_config["n_head"]
        != hf_config["d_model"]
    ):
        raise ValueError(f"{source}: d_head x n_head must equal d_model.")
    fields = renamed_fields(hf_config, XLNET_CONFIG_KEYS, XLNET_REQUIRED_KEYS, source)
    fields["attention_dropout"] = fields.get("dropout", 0.1)
    # Segments 0 and 1, and 2 for XLNet's [CLS]; no position table, so the limit is ours.
    fields.update(architecture="xlnet", type_vocab_size=3)
    return config_from_fields(fields, source)


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
    hf_config, config, tensors, weights_path = read_huggingface_folder(path, "xlnet")
    tensors = base_model_tensors(tensors, "transformer.")
    encoder = XLNetEncoder.from_encoder_config(
        config,
        clamp_len=hf_config.get("clamp_len", -1),
        bidirectional_data=hf_config.get("bi_data", False),
        dtype=dtype,
        name="encoder",
    )
    weights = WeightMap(tensors, weights_path)
    weights.add(encoder.token_embedding.embeddings, "word_embedding.weight")
    weights.add(encoder.mask_embedding.embedding, "mask_emb", lambda w: w.reshape(-1), shape=(1, 1, -1))
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
        add_norms_and_feed_forward(
            weights,
            block,
            prefix + "rel_attn.layer_norm",
            prefix + "ff.layer_1",
            prefix + "ff.layer_2",
            prefix + "ff.layer_norm",
        )
    if "sequence_summary.summary.weight" in tensors:
        weights.add(encoder.pooler.dense.kernel, "sequence_summary.summary.weight", transposed)
        weights.add(encoder.pooler.dense.bias, "sequence_summary.summary.bias")

    model = with_task_head(encoder, hf_config, weights, "logits_proj")
    if "lm_loss.bias" in tensors:
        model = XLNetPretrainer(encoder)
        weights.add(model.lm_head.output_bias, "lm_loss.bias")
        add_output_projection(weights, encoder, "lm_loss.weight", "word_embedding.weight")
    # A tied LM head's matrix is the word embedding; a task head's output layer is not ours.
    weights.apply(
        ignore=IGNORED_TENSORS
        + (r"^lm_loss\.weight$", r"^qa_outputs\.", r"^start_logits\.", r"^end_logits\.", r"^answer_class\.")
    )
    return model


def xlnet_config_to_huggingface(encoder, pad_id=None):
    """XLNet's `config.json` keys of an `XLNetEncoder` (its clamp length and bidirectional data
    settings are the encoder's, not the EncoderConfig's)."""
    config = encoder.config
    return {
        **config_keys_of(config, XLNET_CONFIG_KEYS),
        "attn_type": "bi",
        "d_head": config.head_size,
        "clamp_len": getattr(encoder, "clamp_len", -1),
        "bi_data": getattr(encoder, "bidirectional_data", False),
        **({"pad_token_id": pad_id} if pad_id is not None else {}),
    }


register_huggingface_family(
    "xlnet",
    xlnet_config_from_huggingface,
    load_huggingface_xlnet,
    xlnet_config_to_huggingface,
    {"base": "XLNetModel", "mlm": "XLNetLMHeadModel", "classifier": "XLNetForSequenceClassification"},
)
