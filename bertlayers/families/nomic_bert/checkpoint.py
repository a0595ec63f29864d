"""NomicBERT's Hugging Face checkpoints (model_type "nomic_bert"): transformers' `NomicBertModel`,
`NomicBertForMaskedLM` and `NomicBertForSequenceClassification`, in the layout the published
folders keep (`emb_ln`, fused `attn.Wqkv`, `out_proj`, `fc11`/`fc12`/`fc2`, `norm1`/`norm2`; the
base model under "nomic_bert." or no prefix)."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_embeddings,
    add_fused_attention,
    add_linear,
    add_norm,
    add_output_projection,
    bert_config_fields,
    config_from_fields,
    config_writer,
    output_bias_key,
    register_huggingface_family,
    rotary_bert_config_to_huggingface,
    rotary_theta,
    start_loading,
    with_task_head,
)
from bertlayers.families.bert.encoder import BertEncoder
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    wordpiece_checkpoint_tokenizer,
)


def nomic_bert_config_from_huggingface(hf_config, source):
    """BERT's config names, no learned positions, the rotary base from `rope_parameters`, SwiGLU
    without biases."""
    head_dim = hf_config.get("head_dim")
    if head_dim is not None and head_dim * hf_config.get("num_attention_heads", 1) != hf_config.get("hidden_size"):
        raise ValueError(
            f"{source}: head_dim {head_dim} times num_attention_heads is not hidden_size; the encoder's heads "
            "split the hidden width."
        )
    fields = bert_config_fields({**hf_config, "position_embedding_type": "absolute"}, source)
    fields.update(
        type_vocab_size=hf_config.get("type_vocab_size", 2),
        learned_positions=False,
        attention="rotary",
        rotary_theta=rotary_theta(hf_config, source, default=1000.0),
        feed_forward="gated",
        use_bias=False,
    )
    fields.setdefault("activation", "silu")
    fields.setdefault("max_sequence_length", 2048)
    return config_from_fields(fields, source)


def load_huggingface_nomic_bert(path, dtype=None):
    """Build a NomicBERT model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "nomic_bert") and `model.safetensors`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head for a masked-LM folder, a `SequenceClassifier`
      for a classification folder (over the pooler), else the `BertEncoder` (`sequence_output` ↔
      `last_hidden_state`, `pooled_output` ↔ `pooler_output` where the folder has a pooler).
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "nomic_bert", "nomic_bert.", BertEncoder, dtype, name="nomic_bert_encoder"
    )
    add_embeddings(weights, encoder.embeddings, norm="emb_ln")
    for index, block in enumerate(encoder.transformer_layers):
        layer = f"encoder.layers.{index}."
        add_fused_attention(
            weights, block.attention_layer, encoder.config, layer + "attn.Wqkv", layer + "attn.out_proj"
        )
        add_norm(weights, block.attention_layer_norm, layer + "norm1")
        feed_forward = block.feed_forward_layer
        add_linear(weights, feed_forward.up_dense, layer + "mlp.fc11")
        add_linear(weights, feed_forward.gate_dense, layer + "mlp.fc12")  # the activated half
        add_linear(weights, feed_forward.output_dense, layer + "mlp.fc2")
        add_norm(weights, block.output_layer_norm, layer + "norm2")
    if "pooler.dense.weight" in tensors:
        add_linear(weights, encoder.pooler.dense, "pooler.dense")
    model = with_task_head(encoder, hf_config, weights, "classifier")
    if "cls.predictions.transform.dense.weight" in tensors:
        model = BertPretrainer(encoder, next_sentence=False, name="nomic_bert_pretrainer")
        head = "cls.predictions."
        add_linear(weights, model.lm_head.transform_dense, head + "transform.dense")
        add_norm(weights, model.lm_head.layer_norm, head + "transform.layer_norm")
        weights.add(model.lm_head.output_bias, output_bias_key(tensors, "cls.predictions"))
        add_output_projection(weights, encoder, head + "decoder.weight", "embeddings.word_embeddings.weight")
    weights.apply(ignore=IGNORED_TENSORS + (r"^cls\.predictions\.(decoder\.)?(weight|bias)$",))
    return model


def nomic_bert_config_to_huggingface(config, pad_id=None):
    """BERT's keys with rotary positions (as GTE's), and the head width."""
    return {**rotary_bert_config_to_huggingface(config, pad_id), "head_dim": config.head_size}


register_huggingface_family(
    "nomic_bert",
    nomic_bert_config_from_huggingface,
    load_huggingface_nomic_bert,
    config_writer(nomic_bert_config_to_huggingface),
    {"base": "NomicBertModel", "mlm": "NomicBertForMaskedLM", "classifier": "NomicBertForSequenceClassification"},
)
register_checkpoint_tokenizer("nomic_bert", wordpiece_checkpoint_tokenizer, ["vocab.txt"], prefers_tokenizer_json=True)
