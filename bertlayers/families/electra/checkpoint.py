"""ELECTRA's Hugging Face checkpoints: transformers' `ElectraForPreTraining` (discriminator),
`ElectraForMaskedLM` (generator) and `ElectraModel` folders."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_lm_transform,
    add_output_projection,
    base_model_tensors,
    bert_config_fields,
    bert_config_to_huggingface,
    config_from_fields,
    config_writer,
    map_encoder_weights,
    read_huggingface_folder,
    register_huggingface_family,
    transposed,
    with_task_head,
)
from bertlayers.convert.weight_map import WeightMap
from bertlayers.families.electra.encoders import electra_embeddings, electra_encoder
from bertlayers.families.electra.pretrainer import ElectraDiscriminator, ElectraGenerator
from bertlayers.tokenizers.checkpoint_tokenizer import register_checkpoint_tokenizer, wordpiece_checkpoint_tokenizer


def electra_config_from_huggingface(hf_config, source):
    """BERT's config names, and an embedding width of its own (narrower than the hidden size in the small models)."""
    fields = bert_config_fields(hf_config, source)
    fields["embedding_size"] = hf_config.get("embedding_size", hf_config["hidden_size"])
    # No pretrained pooler: a fresh one reads [CLS] through GELU, as transformers'
    # ElectraForSequenceClassification's `classifier.dense` does.
    fields["pooler_activation"] = "gelu"
    return config_from_fields(fields, source)


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
    hf_config, config, tensors, weights_path = read_huggingface_folder(path, "electra")
    tensors = base_model_tensors(tensors, "electra.")
    encoder = electra_encoder(config, electra_embeddings(config, dtype), dtype=dtype, name="encoder")
    weights = WeightMap(tensors, weights_path)
    map_encoder_weights(encoder, config, weights, pooler=False)
    if encoder.embedding_projection is not None:
        weights.add(encoder.embedding_projection.kernel, "embeddings_project.weight", transposed)
        weights.add(encoder.embedding_projection.bias, "embeddings_project.bias")

    if any(key.startswith("generator_predictions.") for key in tensors):
        model = ElectraGenerator(encoder)
        add_lm_transform(
            weights,
            model.generator_head,
            "generator_predictions.dense",
            "generator_predictions.LayerNorm",
            "generator_lm_head.bias",
        )
        add_output_projection(weights, encoder, "generator_lm_head.weight", "embeddings.word_embeddings.weight")
    elif any(key.startswith("discriminator_predictions.") for key in tensors):
        model = ElectraDiscriminator(encoder)
        head = model.discriminator_head
        weights.add(head.dense.kernel, "discriminator_predictions.dense.weight", transposed)
        weights.add(head.dense.bias, "discriminator_predictions.dense.bias")
        weights.add(head.prediction.kernel, "discriminator_predictions.dense_prediction.weight", transposed)
        weights.add(head.prediction.bias, "discriminator_predictions.dense_prediction.bias")
    else:
        model = with_task_head(encoder, hf_config, weights, "classifier.out_proj", pooler="classifier.dense")
    # A tied generator's output matrix is its word embedding; a saved copy adds nothing.
    weights.apply(ignore=IGNORED_TENSORS + (r"^generator_lm_head\.weight$",))
    return model


def electra_config_to_huggingface(config, pad_id=None):
    return {**bert_config_to_huggingface(config, pad_id), "embedding_size": config.embedding_size or config.hidden_size}


register_huggingface_family(
    "electra",
    electra_config_from_huggingface,
    load_huggingface_electra,
    config_writer(electra_config_to_huggingface),
    {
        "base": "ElectraModel",
        "mlm": "ElectraForMaskedLM",
        "discriminator": "ElectraForPreTraining",
        "classifier": "ElectraForSequenceClassification",
    },
)
register_checkpoint_tokenizer("electra", wordpiece_checkpoint_tokenizer, ["vocab.txt"])
