"""RoBERTa's and XLM-R's Hugging Face checkpoints: transformers' `RobertaModel`,
`RobertaForMaskedLM` and their XLM-R twins (one layout under the prefix "roberta.")."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_lm_transform,
    add_output_projection,
    bert_config_fields,
    bert_config_to_huggingface,
    config_from_fields,
    config_writer,
    map_encoder_weights,
    output_bias_key,
    register_huggingface_family,
    start_loading,
    with_task_head,
)
from bertlayers.families.bert.encoder import BertEncoder
from bertlayers.models.pretrainer import BertPretrainer


def _padding_id(hf_config):
    return hf_config.get("pad_token_id", 1)


def roberta_config_from_huggingface(hf_config, source):
    """BERT's config names; RoBERTa counts positions from `pad_token_id + 1` (fairseq's
    convention), so `max_position_embeddings` (514 in the releases) holds that many fewer
    usable positions (512)."""
    fields = bert_config_fields(hf_config, source)
    if "max_position_embeddings" in hf_config:
        fields["max_sequence_length"] = hf_config["max_position_embeddings"] - _padding_id(hf_config) - 1
    return config_from_fields(fields, source)


def load_huggingface_roberta(path, dtype=None):
    """Build a RoBERTa (or XLM-R) model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (`model_type` "roberta" or "xlm-roberta") and
        `model.safetensors`: a `RobertaModel` or a `RobertaForMaskedLM` (tied or untied,
        as `tie_word_embeddings` says), or the XLM-R classes.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head (`mlm` ↔ transformers' `logits` at the masked
      positions) for a masked-LM folder, a `SequenceClassifier` (its `classifier.dense` the
      encoder's pooler, `out_proj` the output layer; `logits` ↔ `logits`) for a
      sequence-classification folder, else its `BertEncoder` (`sequence_output` ↔
      `last_hidden_state`; `pooled_output` ↔ `pooler_output` where the folder has a pooler).

      transformers gives position `pad_token_id + 1 + i` to the i-th real token; the encoder
      reads the table from that row on, so outputs agree wherever the padding is on the right.

    Raises:
      As `load_huggingface_bert`.
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, ("roberta", "xlm-roberta"), "roberta.", BertEncoder, dtype
    )
    first_position = _padding_id(hf_config) + 1
    map_encoder_weights(
        encoder,
        encoder.config,
        weights,
        pooler="pooler.dense.weight" in tensors,
        positions=lambda table: table[first_position:],
    )
    model = with_task_head(encoder, hf_config, weights, "classifier.out_proj", pooler="classifier.dense")
    if "lm_head.dense.weight" in tensors:
        model = BertPretrainer(encoder, next_sentence=False, name="roberta_pretrainer")
        add_lm_transform(
            weights, model.lm_head, "lm_head.dense", "lm_head.layer_norm", output_bias_key(tensors, "lm_head")
        )
        add_output_projection(weights, encoder, "lm_head.decoder.weight", "embeddings.word_embeddings.weight")
    # The LM head's other bias copy, and a task head, are not ours.
    weights.apply(ignore=IGNORED_TENSORS + (r"^lm_head\.(decoder\.)?(weight|bias)$", r"^qa_outputs\."))
    return model


def roberta_config_to_huggingface(config, pad_id=None):
    """BERT's keys, with fairseq's position count (`pad_token_id + 1` rows before the first)."""
    pad_id = 1 if pad_id is None else pad_id
    return {
        **bert_config_to_huggingface(config, pad_id),
        "max_position_embeddings": config.max_sequence_length + pad_id + 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
    }


for _model_type, _prefix in (("roberta", "Roberta"), ("xlm-roberta", "XLMRoberta")):
    register_huggingface_family(
        _model_type,
        roberta_config_from_huggingface,
        load_huggingface_roberta,
        config_writer(roberta_config_to_huggingface),
        {
            "base": f"{_prefix}Model",
            "mlm": f"{_prefix}ForMaskedLM",
            "classifier": f"{_prefix}ForSequenceClassification",
        },
    )
