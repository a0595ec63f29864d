"""A language model read as a judge: the probability that it answers "yes" rather than "no" after
a text (Qwen3-Reranker's relevance score, and any LLM reranker that scores by answer tokens)."""

import keras
from keras import ops

from bertlayers.layers.sequence_pooling import SequencePooling
from bertlayers.models.encoder_model import INPUT_NAMES, EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class AnswerTokenScorer(EncoderModel):
    """score `[batch]` = softmax([logit(no), logit(yes)])[yes] of the language model's next token
    after each text's last real token (padding on either side; the rerankers pad on the left).

    Inputs: the encoder's. Outputs: `logits` float32 `[batch, 2]` (the negative answer's, then the
    positive's: a two-class classifier's logits) and `score` float32 `[batch]`, the positive's
    probability. Only the last token's row goes through the LM head.

    Args:
      language_model: a pretrainer with an `lm_head` over its `encoder`'s states
        (`CausalLMPretrainer`, as `load_checkpoint` returns a `...ForCausalLM` folder).
      positive_token_id, negative_token_id: the answers' token ids ("yes" and "no").
    """

    uses_pooled_output = False

    def __init__(
        self,
        language_model: keras.Model,
        positive_token_id: int,
        negative_token_id: int,
        name: str = "answer_token_scorer",
        trainable: bool = True,
        **kwargs,
    ) -> None:
        encoder = language_model.encoder
        vocabulary = encoder.config.vocabulary_size
        for field, value in (("positive_token_id", positive_token_id), ("negative_token_id", negative_token_id)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocabulary:
                raise ValueError(
                    f"AnswerTokenScorer.{field} must be a token id in [0, {vocabulary}) (the encoder's vocabulary), "
                    f"got {value!r}."
                )
        if positive_token_id == negative_token_id:
            raise ValueError(f"AnswerTokenScorer: the two answers are one token ({positive_token_id}).")
        inputs = encoder_inputs()
        sequence = encoder({key: inputs[key] for key in INPUT_NAMES})["sequence_output"]  # [B, S, H]
        last = SequencePooling("last", dtype=encoder.layer_dtype_policy, name="last_token")(
            sequence, inputs["padding_mask"]
        )  # [B, H]
        vocabulary_logits = language_model.lm_head(ops.expand_dims(last, 1))[:, 0]  # [B, V]
        logits = ops.take(vocabulary_logits, [int(negative_token_id), int(positive_token_id)], axis=1)  # [B, 2]
        score = ops.softmax(ops.cast(logits, "float32"), axis=-1)[:, 1]
        super().__init__(
            inputs=inputs, outputs={"logits": logits, "score": score}, name=name, trainable=trainable, **kwargs
        )
        self.language_model = language_model
        self.encoder = encoder
        self.positive_token_id = int(positive_token_id)
        self.negative_token_id = int(negative_token_id)

    def default_losses(self):
        # Fine-tuned as a two-class classifier over (no, yes): label 1 where the text is relevant.
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def get_config(self):
        return {
            "language_model": keras.saving.serialize_keras_object(self.language_model),
            "positive_token_id": self.positive_token_id,
            "negative_token_id": self.negative_token_id,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["language_model"] = keras.saving.deserialize_keras_object(config["language_model"])
        return cls(**config)
