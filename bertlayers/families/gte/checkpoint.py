"""GTE's Hugging Face checkpoints (model_type "gte"): transformers' `GteModel`, `GteForMaskedLM` and
`GteForSequenceClassification`, in the layout the published folders keep (fused `qkv_proj` and
`up_gate_proj`, `attn_ln`, `mlp_ln`; base model under "gte." or the original "new.")."""

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
    register_huggingface_family,
    rotary_bert_config_to_huggingface,
    rotary_theta,
    start_loading,
    with_task_head,
)
from bertlayers.families.gte.encoder import GteEncoder
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    wordpiece_checkpoint_tokenizer,
)


def gte_config_from_huggingface(hf_config, source):
    """BERT's config names, no learned positions (`max_position_embeddings` bounds the rotary
    positions), the rotary base from `rope_parameters`."""
    fields = bert_config_fields({**hf_config, "position_embedding_type": "absolute"}, source)
    fields.update(
        architecture="gte",
        type_vocab_size=hf_config.get("type_vocab_size", 1),
        learned_positions=False,
        attention="rotary",
        rotary_theta=rotary_theta(hf_config, source, default=160000.0),
        feed_forward="gated_output_bias",
    )
    fields.setdefault("max_sequence_length", 8192)
    return config_from_fields(fields, source)


def load_huggingface_gte(path, dtype=None):
    """Build a GTE model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "gte") and `model.safetensors`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head for a masked-LM folder (`mlm` ↔ `logits` at the
      masked positions), a `SequenceClassifier` for a classification folder (over the pooler),
      else the `GteEncoder` (`sequence_output` ↔ `last_hidden_state`, `pooled_output` ↔
      `pooler_output` where the folder has a pooler).
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "gte", ("gte.", "new."), GteEncoder, dtype, name="gte_encoder"
    )  # transformers 5 saves "gte."; the published folders keep the original "new."
    add_embeddings(weights, encoder.embeddings)
    for index, block in enumerate(encoder.transformer_layers):
        layer = f"encoder.layer.{index}."
        add_fused_attention(
            weights, block.attention_layer, encoder.config, layer + "attention.qkv_proj", layer + "attention.o_proj"
        )
        add_norm(weights, block.attention_layer_norm, layer + "attn_ln")
        # up_gate_proj stacks the linear half first, then the activated gate.
        feed_forward = block.feed_forward_layer
        add_linear(weights, feed_forward.up_dense, layer + "mlp.up_gate_proj", part=0, parts=2)
        add_linear(weights, feed_forward.gate_dense, layer + "mlp.up_gate_proj", part=1, parts=2)
        add_linear(weights, feed_forward.output_dense, layer + "mlp.down_proj")
        add_norm(weights, block.output_layer_norm, layer + "mlp_ln")
    if "pooler.dense.weight" in tensors:
        add_linear(weights, encoder.pooler.dense, "pooler.dense")
    model = with_task_head(encoder, hf_config, weights, "classifier")
    if "lm_head.dense.weight" in tensors:
        model = BertPretrainer(encoder, next_sentence=False, name="gte_pretrainer")
        add_linear(weights, model.lm_head.transform_dense, "lm_head.dense")
        add_norm(weights, model.lm_head.layer_norm, "lm_head.norm")
        weights.add(model.lm_head.output_bias, "lm_head.decoder.bias")
        add_output_projection(weights, encoder, "lm_head.decoder.weight", "embeddings.word_embeddings.weight")
    weights.apply(ignore=IGNORED_TENSORS + (r"^lm_head\.decoder\.weight$",))
    return model


register_huggingface_family(
    "gte",
    gte_config_from_huggingface,
    load_huggingface_gte,
    config_writer(rotary_bert_config_to_huggingface),
    {"base": "GteModel", "mlm": "GteForMaskedLM", "classifier": "GteForSequenceClassification"},
)
register_checkpoint_tokenizer("gte", wordpiece_checkpoint_tokenizer, ["vocab.txt"], prefers_tokenizer_json=True)
