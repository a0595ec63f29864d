"""BERT's Hugging Face checkpoints (model_type "bert")."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_lm_transform,
    add_output_projection,
    bert_config,
    bert_config_to_huggingface,
    config_writer,
    map_encoder_weights,
    output_bias_key,
    register_huggingface_family,
    start_loading,
    transposed,
    with_task_head,
)
from bertlayers.families.bert.encoder import BertEncoder
from bertlayers.models.pretrainer import BertPretrainer


def load_huggingface_bert(path, dtype=None, name="bert_encoder"):
    """Build a `BertEncoder` from a Hugging Face BERT checkpoint folder.

    Args:
      path: a folder with `config.json` and `model.safetensors`: a `BertModel`, a
        `BertForMaskedLM` (tied or untied), a `BertForPreTraining`, a
        `BertForSequenceClassification` or a `BertForTokenClassification`.
      dtype: dtype policy of the encoder, e.g. "mixed_bfloat16"; weights stay float32.
      name: the encoder's name.

    Returns:
      A `BertEncoder` whose outputs match transformers' `BertModel` (`sequence_output` ↔
      `last_hidden_state`, `pooled_output` ↔ `pooler_output` where the folder has a pooler); for a
      `BertForSequenceClassification` folder, a `SequenceClassifier` over it (`logits` ↔
      `logits`, the config's `id2label` as its `label_names`); a `TokenClassifier` for a token
      classification folder; a `BertPretrainer` for a masked-LM folder (`mlm` ↔ transformers'
      `logits` at the masked positions; with its next-sentence head where the folder has
      `cls.seq_relationship`, ↔ `seq_relationship_logits`).

    Raises:
      FileNotFoundError: a required file is missing.
      ValueError: an unsupported or invalid config, a corrupt weights file, a `vocab.txt` whose
        size disagrees with the config, or (CheckpointMismatchError) tensors missing from the
        checkpoint or of the wrong shape, all listed.
    """
    hf_config, tensors, encoder, weights = start_loading(path, "bert", "bert.", BertEncoder, dtype, name)
    # BertForMaskedLM and BertForTokenClassification are saved without the pooler.
    map_encoder_weights(encoder, encoder.config, weights, pooler="pooler.dense.weight" in tensors)
    model = with_task_head(encoder, hf_config, weights, "classifier")
    if model is encoder and "cls.predictions.transform.dense.weight" in tensors:
        next_sentence = "cls.seq_relationship.weight" in tensors
        model = BertPretrainer(encoder, next_sentence=next_sentence, name="bert_pretrainer")
        add_lm_transform(
            weights,
            model.lm_head,
            "cls.predictions.transform.dense",
            "cls.predictions.transform.LayerNorm",
            output_bias_key(tensors, "cls.predictions"),
        )
        add_output_projection(weights, encoder, "cls.predictions.decoder.weight", "embeddings.word_embeddings.weight")
        if next_sentence:
            weights.add(model.next_sentence_head.output_dense.kernel, "cls.seq_relationship.weight", transposed)
            weights.add(model.next_sentence_head.output_dense.bias, "cls.seq_relationship.bias")
    # With the LM head loaded, its other bias copy is not ours.
    lm_copies = (r"^cls\.predictions\.(decoder\.)?(weight|bias)$",) if model is not encoder else ()
    weights.apply(ignore=IGNORED_TENSORS + lm_copies)
    return model


register_huggingface_family(
    "bert",
    bert_config,
    load_huggingface_bert,
    config_writer(bert_config_to_huggingface),
    {"base": "BertModel", "mlm": "BertForMaskedLM", "classifier": "BertForSequenceClassification"},
)
