"""DistilBERT's Hugging Face checkpoints: transformers' `DistilBertModel` and
`DistilBertForMaskedLM` folders."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_attention,
    add_embeddings,
    add_lm_transform,
    add_norms_and_feed_forward,
    add_output_projection,
    config_from_fields,
    config_keys_of,
    config_writer,
    register_huggingface_family,
    renamed_fields,
    start_loading,
    with_task_head,
)
from bertlayers.families.bert.encoder import BertEncoder
from bertlayers.models.pretrainer import BertPretrainer

# DistilBERT's config.json names (its LayerNorm epsilon is fixed at 1e-12, BERT's default).
DISTILBERT_CONFIG_KEYS = {
    "vocab_size": "vocabulary_size",
    "n_layers": "num_layers",
    "dim": "hidden_size",
    "n_heads": "num_heads",
    "hidden_dim": "intermediate_size",
    "activation": "activation",
    "dropout": "dropout",
    "attention_dropout": "attention_dropout",
    "max_position_embeddings": "max_sequence_length",
    "initializer_range": "initializer_range",
}


def distilbert_config_from_huggingface(hf_config, source):
    """An `EncoderConfig` with no segment embedding (`type_vocab_size` 0)."""
    fields = renamed_fields(
        hf_config, DISTILBERT_CONFIG_KEYS, ("vocab_size", "n_layers", "dim", "n_heads", "hidden_dim"), source
    )
    # No segment embedding; no pretrained pooler: a fresh one reads [CLS] through ReLU, as
    # transformers' DistilBertForSequenceClassification's `pre_classifier` does.
    fields.update(type_vocab_size=0, pooler_activation="relu")
    return config_from_fields(fields, source)


def load_huggingface_distilbert(path, dtype=None):
    """Build a DistilBERT model from a Hugging Face DistilBERT checkpoint folder.

    Args:
      path: a folder with `config.json` (`model_type` "distilbert") and `model.safetensors`: a
        `DistilBertModel` or a `DistilBertForMaskedLM` (tied or untied, as
        `tie_word_embeddings` says).
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head (`mlm` ↔ transformers' `logits` at the masked
      positions) for a masked-LM folder, a `SequenceClassifier` (`pre_classifier` as the
      encoder's pooler) for a sequence-classification folder, else its `BertEncoder`
      (`sequence_output` ↔ `last_hidden_state`). DistilBERT has no pooler: elsewhere
      `pooled_output` comes from a freshly initialized one (ReLU), trained by fine-tuning like a
      task head.

    Raises:
      As `load_huggingface_bert`.
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "distilbert", "distilbert.", BertEncoder, dtype, own_names=("transformer.",)
    )
    config = encoder.config
    add_embeddings(weights, encoder.embeddings)
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"transformer.layer.{index}."
        attention = prefix + "attention."
        add_attention(
            weights,
            block.attention_layer,
            config,
            attention + "q_lin",
            attention + "k_lin",
            attention + "v_lin",
            attention + "out_lin",
        )
        add_norms_and_feed_forward(
            weights,
            block,
            prefix + "sa_layer_norm",
            prefix + "ffn.lin1",
            prefix + "ffn.lin2",
            prefix + "output_layer_norm",
        )
    model = with_task_head(encoder, hf_config, weights, "classifier", pooler="pre_classifier")
    if "vocab_transform.weight" in tensors:
        model = BertPretrainer(encoder, next_sentence=False, name="distilbert_pretrainer")
        add_lm_transform(weights, model.lm_head, "vocab_transform", "vocab_layer_norm", "vocab_projector.bias")
        add_output_projection(weights, encoder, "vocab_projector.weight", "embeddings.word_embeddings.weight")
    weights.apply(ignore=IGNORED_TENSORS + (r"^vocab_projector\.weight$", r"^qa_outputs\."))
    return model


def distilbert_config_to_huggingface(config, pad_id=None):
    return {
        **config_keys_of(config, DISTILBERT_CONFIG_KEYS),
        "sinusoidal_pos_embds": False,
        "pad_token_id": 0 if pad_id is None else pad_id,
    }


register_huggingface_family(
    "distilbert",
    distilbert_config_from_huggingface,
    load_huggingface_distilbert,
    config_writer(distilbert_config_to_huggingface),
    {"base": "DistilBertModel", "mlm": "DistilBertForMaskedLM", "classifier": "DistilBertForSequenceClassification"},
)
