"""ALBERT's Hugging Face checkpoints: transformers' `AlbertModel`, `AlbertForMaskedLM` and
`AlbertForPreTraining` folders."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_attention,
    add_embeddings,
    add_lm_transform,
    add_norms_and_feed_forward,
    add_output_projection,
    bert_config_fields,
    bert_config_to_huggingface,
    config_from_fields,
    config_writer,
    output_bias_key,
    register_huggingface_family,
    start_loading,
    transposed,
    with_task_head,
)
from bertlayers.families.albert.encoder import AlbertEncoder
from bertlayers.models.pretrainer import BertPretrainer


def albert_config_from_huggingface(hf_config, source):
    """BERT's config names, the embedding width E and the number of distinct layer groups."""
    if int(hf_config.get("inner_group_num", 1)) != 1:
        raise ValueError(
            f"{source}: inner_group_num {hf_config['inner_group_num']} is not supported (ALBERT's releases use 1)."
        )
    fields = bert_config_fields(hf_config, source)
    fields.update(
        architecture="albert",
        embedding_size=hf_config.get("embedding_size", 128),
        num_layer_groups=hf_config.get("num_hidden_groups", 1),
    )
    return config_from_fields(fields, source)


def load_huggingface_albert(path, dtype=None):
    """Build an ALBERT model from a Hugging Face ALBERT checkpoint folder.

    Args:
      path: a folder with `config.json` (`model_type` "albert") and `model.safetensors`: an
        `AlbertModel`, an `AlbertForMaskedLM` (tied or untied, as `tie_word_embeddings` says)
        or an `AlbertForPreTraining` (masked LM + sentence order).
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` (`mlm` ↔ transformers' `prediction_logits` / `logits` at the masked
      positions; `nsp` ↔ `sop_logits` where the folder has the sentence-order head), a
      `SequenceClassifier` for an `AlbertForSequenceClassification` folder, else its
      `AlbertEncoder` (`sequence_output` ↔ `last_hidden_state`, `pooled_output` ↔ `pooler_output`).

    Raises:
      As `load_huggingface_bert`.
    """
    hf_config, tensors, encoder, weights = start_loading(path, "albert", "albert.", AlbertEncoder, dtype)
    config = encoder.config
    add_embeddings(weights, encoder.embeddings)
    projection = encoder.embeddings.embedding_projection
    weights.add(projection.kernel, "encoder.embedding_hidden_mapping_in.weight", transposed)
    weights.add(projection.bias, "encoder.embedding_hidden_mapping_in.bias")
    for group, block in enumerate(encoder.transformer_layers):
        prefix = f"encoder.albert_layer_groups.{group}.albert_layers.0."
        attention = prefix + "attention."
        add_attention(
            weights,
            block.attention_layer,
            config,
            attention + "query",
            attention + "key",
            attention + "value",
            attention + "dense",
        )
        add_norms_and_feed_forward(
            weights,
            block,
            attention + "LayerNorm",
            prefix + "ffn",
            prefix + "ffn_output",
            prefix + "full_layer_layer_norm",
        )
    if "pooler.weight" in tensors:
        weights.add(encoder.pooler.dense.kernel, "pooler.weight", transposed)
        weights.add(encoder.pooler.dense.bias, "pooler.bias")

    model = with_task_head(encoder, hf_config, weights, "classifier")
    if "predictions.dense.weight" in tensors:
        sentence_order = "sop_classifier.classifier.weight" in tensors
        model = BertPretrainer(encoder, next_sentence=sentence_order, name="albert_pretrainer")
        add_lm_transform(
            weights,
            model.lm_head,
            "predictions.dense",
            "predictions.LayerNorm",
            output_bias_key(tensors, "predictions"),
        )
        add_output_projection(weights, encoder, "predictions.decoder.weight", "embeddings.word_embeddings.weight")
        if sentence_order:
            weights.add(model.next_sentence_head.output_dense.kernel, "sop_classifier.classifier.weight", transposed)
            weights.add(model.next_sentence_head.output_dense.bias, "sop_classifier.classifier.bias")
    # The LM head's other bias copy, and a task head, are not ours.
    weights.apply(ignore=IGNORED_TENSORS + (r"^predictions\.(decoder\.)?(weight|bias)$", r"^qa_outputs\."))
    return model


def albert_config_to_huggingface(config, pad_id=None):
    return {
        **bert_config_to_huggingface(config, pad_id),
        "embedding_size": config.embedding_size,
        "num_hidden_groups": config.num_layer_groups,
        "inner_group_num": 1,
    }


register_huggingface_family(
    "albert",
    albert_config_from_huggingface,
    load_huggingface_albert,
    config_writer(albert_config_to_huggingface),
    {"base": "AlbertModel", "mlm": "AlbertForMaskedLM", "classifier": "AlbertForSequenceClassification"},
)
