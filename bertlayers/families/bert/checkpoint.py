"""BERT's Hugging Face checkpoints (model_type "bert")."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    bert_config,
    bert_config_to_huggingface,
    config_writer,
    map_encoder_weights,
    register_huggingface_family,
    start_loading,
    with_sequence_classifier,
)
from bertlayers.families.bert.encoder import BertEncoder


def load_huggingface_bert(path, dtype=None, name="bert_encoder"):
    """Build a `BertEncoder` from a Hugging Face BERT checkpoint folder.

    Args:
      path: a folder with `config.json` and `model.safetensors` (a `BertModel`, or a model
        whose encoder tensors carry a `bert.` prefix, such as `BertForPreTraining`).
      dtype: dtype policy of the encoder, e.g. "mixed_bfloat16"; weights stay float32.
      name: the encoder's name.

    Returns:
      A `BertEncoder` whose outputs match transformers' `BertModel` (`sequence_output` ↔
      `last_hidden_state`, `pooled_output` ↔ `pooler_output`); for a
      `BertForSequenceClassification` folder, a `SequenceClassifier` over it (`logits` ↔
      `logits`, the config's `id2label` as its `label_names`).

    Raises:
      FileNotFoundError: a required file is missing.
      ValueError: an unsupported or invalid config, a corrupt weights file, a `vocab.txt` whose
        size disagrees with the config, or (CheckpointMismatchError) tensors missing from the
        checkpoint or of the wrong shape, all listed.
    """
    hf_config, _, encoder, weights = start_loading(path, "bert", "bert.", BertEncoder, dtype, name)
    map_encoder_weights(encoder, encoder.config, weights)
    model = with_sequence_classifier(encoder, hf_config, weights, "classifier")
    weights.apply(ignore=IGNORED_TENSORS)
    return model


register_huggingface_family(
    "bert",
    bert_config,
    load_huggingface_bert,
    config_writer(bert_config_to_huggingface),
    {"base": "BertModel", "mlm": "BertForMaskedLM", "classifier": "BertForSequenceClassification"},
)
