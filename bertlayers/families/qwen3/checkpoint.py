"""Qwen3's Hugging Face checkpoints (model_type "qwen3"): transformers' `Qwen3Model` (the
embedders' folders), `Qwen3ForCausalLM` (the rerankers' and the base decoders') and
`Qwen3ForSequenceClassification`, Llama's tensor names (`embed_tokens`, `q/k/v/o_proj`,
`q_norm`/`k_norm`, `gate/up/down_proj`, `input_layernorm`, `post_attention_layernorm`, `norm`,
`lm_head`, `score`)."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_decoder_block,
    add_norm,
    add_output_bias,
    add_output_projection,
    config_writer,
    decoder_config_keys,
    is_token_classifier,
    label_names,
    register_huggingface_family,
    require_keys,
    rotary_theta,
    start_loading,
    tied_output,
    transposed,
)
from bertlayers.families.qwen3.encoder import Qwen3Encoder
from bertlayers.families.qwen3.presets import qwen3_config
from bertlayers.models.pretrainer import CausalLMPretrainer
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    tokenizer_json_checkpoint_tokenizer,
)
from bertlayers.tokenizers.pair_prompt import PairPrompt, register_reranker_prompt


def qwen3_config_from_huggingface(hf_config, source):
    """An `EncoderConfig` from a Qwen3 `config.json` (transformers' names and defaults: heads of
    128, untied, ε 1e-6, θ 10,000)."""
    require_keys(
        hf_config,
        ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
        source,
    )
    if hf_config.get("attention_bias", False):
        raise ValueError(
            f"{source}: attention_bias is true; Qwen3's feed-forward network has no biases and the encoder takes "
            "one bias setting for its projections."
        )
    kinds = set(hf_config.get("layer_types") or ["full_attention"])
    if hf_config.get("use_sliding_window", False) or kinds != {"full_attention"}:
        raise ValueError(
            f"{source}: use_sliding_window is true or layer_types names {sorted(kinds)}; Qwen3's causal sliding "
            "window (the last sliding_window tokens) is not supported, only full attention."
        )
    heads = hf_config["num_attention_heads"]
    kv_heads = hf_config.get("num_key_value_heads")
    fields = dict(
        vocabulary_size=hf_config["vocab_size"],
        num_key_value_heads=None if kv_heads in (None, heads) else kv_heads,
        head_dim=hf_config.get("head_dim") or 128,
        activation=hf_config.get("hidden_act", "silu"),
        attention_dropout=float(hf_config.get("attention_dropout", 0.0)),
        max_sequence_length=hf_config.get("max_position_embeddings", 32768),
        layer_norm_epsilon=hf_config.get("rms_norm_eps", 1e-6),
        initializer_range=hf_config.get("initializer_range", 0.02),
        rotary_theta=rotary_theta(hf_config, source, default=10000.0),
        tie_word_embeddings=tied_output({"tie_word_embeddings": False, **hf_config}),
    )
    try:
        return qwen3_config(
            hf_config["num_hidden_layers"], hf_config["hidden_size"], heads, hf_config["intermediate_size"], **fields
        )
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def load_huggingface_qwen3(path, dtype=None):
    """Build a Qwen3 model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "qwen3") and `model.safetensors`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `CausalLMPretrainer` for a causal-LM folder (`lm` ↔ `logits`, the next token's at every
      position; `AnswerTokenScorer` over it is Qwen3-Reranker's score), a `SequenceClassifier` for
      a `Qwen3ForSequenceClassification` folder (`logits` ↔ `logits`: `score`, no bias and no
      dropout, over the state of the last real token whose id is not `pad_token_id`, as
      transformers reads it; no pooler), else the
      `Qwen3Encoder` (`sequence_output` ↔ `last_hidden_state`, after the final norm).
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "qwen3", "model.", Qwen3Encoder, dtype, name="qwen3_encoder"
    )
    if is_token_classifier(hf_config):
        raise ValueError(
            f"{weights.source}: config.json names {hf_config['architectures']}; a Qwen3 folder loads as "
            "Qwen3Model, Qwen3ForCausalLM or Qwen3ForSequenceClassification."
        )
    weights.add(encoder.token_embedding.embeddings, "embed_tokens.weight")
    for index, block in enumerate(encoder.transformer_layers):
        add_decoder_block(weights, block, encoder.config, f"layers.{index}.")
    add_norm(weights, encoder.final_layer_norm, "norm")
    model = encoder
    if "score.weight" in tensors:
        count = tensors["score.weight"].shape[0]
        model = SequenceClassifier(
            encoder,
            count,
            dropout=0.0,
            label_names=label_names(hf_config, count) if count > 1 else None,
            pooling="last",
            output_bias=False,
            pad_id=hf_config.get("pad_token_id"),
        )
        weights.add(model.head.output_dense.kernel, "score.weight", transposed)
    elif "lm_head.weight" in tensors or (
        hf_config.get("architectures") == ["Qwen3ForCausalLM"] and encoder.config.tie_word_embeddings
    ):
        model = CausalLMPretrainer(encoder, name="qwen3_causal_lm")
        add_output_bias(weights, model.lm_head, "lm_head.bias")  # none: zeros
        add_output_projection(weights, encoder, "lm_head.weight", "embed_tokens.weight")
    # The pooler (the encoder's summary dense layer) has no tensor in a Qwen3 folder.
    weights.apply(ignore=IGNORED_TENSORS + (r"^lm_head\.weight$",))
    return model


def qwen3_config_to_huggingface(config, pad_id=None):
    """Qwen3's `config.json` keys of an EncoderConfig."""
    return {
        **decoder_config_keys(config),
        "attention_bias": False,
        "use_sliding_window": False,
        "tie_word_embeddings": config.tie_word_embeddings,
        **({"pad_token_id": pad_id} if pad_id is not None else {}),
    }


register_huggingface_family(
    "qwen3",
    qwen3_config_from_huggingface,
    load_huggingface_qwen3,
    config_writer(qwen3_config_to_huggingface),
    {"base": "Qwen3Model", "mlm": "Qwen3ForCausalLM", "classifier": "Qwen3ForSequenceClassification"},
    classifier_pooling="last",
)


# Its tokenizer.json, padded as its tokenizer_config.json says (pad_token <|endoftext|>, left).
register_checkpoint_tokenizer("qwen3", tokenizer_json_checkpoint_tokenizer, ["tokenizer.json"])


# Qwen3-Reranker's prompt (its model card): the pair under an instruction in a chat turn, the
# assistant's turn opened with an empty thought; its score is "yes" against "no" at the last token.
QWEN3_RERANKER_PROMPT = PairPrompt(
    prefix=(
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
        'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
    ),
    pair="<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}",
    suffix="<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    instruction="Given a web search query, retrieve relevant passages that answer the query",
)
register_reranker_prompt("qwen3", QWEN3_RERANKER_PROMPT, answers=("yes", "no"))
