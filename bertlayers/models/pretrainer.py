"""Pretraining models: an encoder with its pretraining heads.

`BertPretrainer` covers BERT (masked LM + next-sentence prediction), ALBERT (masked LM +
sentence-order prediction, over an `AlbertEncoder`) and RoBERTa (masked LM only:
`next_sentence=False`). `CausalLMPretrainer` is the BERT paper's left-to-right ablation.

The masked-LM output projection is the encoder's token embedding (tied weights). Both
models rebuild that tie in `from_config`, so they save and load as `.keras` files, which a
plain functional model holding a tied head cannot do.
"""

import keras
from keras import ops

from bertlayers.layers.classification_head import NextSentenceHead
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.masked_lm_head import MaskedLMHead
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs
from bertlayers.networks.encoder_base import INPUT_NAMES


def masked_lm_head(encoder, name="lm_head"):
    """A `MaskedLMHead` tied to `encoder`'s token embedding, with its activation and policy (and
    the transform's bias and norm kind where the encoder's family says: `lm_head_arguments`)."""
    config = encoder.config
    arguments = dict(
        token_embedding=encoder.token_embedding,
        activation=config.activation,
        layer_norm_epsilon=config.layer_norm_epsilon,
        kernel_initializer=bert_initializer(config.initializer_range),
        dtype=encoder.layer_dtype_policy,
        name=name,
    )
    arguments.update(getattr(encoder, "lm_head_arguments", dict)())
    return MaskedLMHead(**arguments)


class PretrainerBase(EncoderModel):
    """What the pretrainers share: the LM head tied to the encoder's token embedding."""

    def _lm_head(self, encoder):
        return masked_lm_head(encoder)

    def default_losses(self):
        # Targets are token ids (sparse); the heads return logits.
        return {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True) for name in self.head_names}

    def default_metrics(self):
        # Weighted: the masked-LM accuracy counts only real predictions (masked_lm_weights).
        return {name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")] for name in self.head_names}


@keras.saving.register_keras_serializable(package="bertlayers")
class BertPretrainer(PretrainerBase):
    """Encoder + masked-LM head (+ next-sentence / sentence-order head).

    Inputs: the encoder's (`token_ids`, `segment_ids`, `padding_mask`, `[batch, seq]`) and
    `masked_positions` `[batch, P]`.
    Outputs: `mlm` float32 logits `[batch, P, V]`; `nsp` float32 logits `[batch, 2]` when
    `next_sentence` is True.

    Args:
      encoder: a `BertEncoder` or `AlbertEncoder`.
      next_sentence: add the 2-way sentence head on the pooled output (NSP for BERT, SOP for
        ALBERT: the data decides what its labels mean); False for RoBERTa.
    """

    def __init__(
        self,
        encoder: keras.Model,
        next_sentence: bool = True,
        name: str = "bert_pretrainer",
        trainable: bool = True,
        **kwargs,
    ) -> None:
        inputs = encoder_inputs()
        inputs["masked_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_positions")
        encoded = encoder({name: inputs[name] for name in INPUT_NAMES})
        lm_head = self._lm_head(encoder)
        # The heads read the last layer at the masked positions (and [CLS]) only: the encoder
        # computes just those rows of it, in one call sharing its keys and values.
        positions = inputs["masked_positions"]  # [B, P]
        with_first = next_sentence and encoder.pooler.position == "first"
        if with_first:
            positions = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)  # [B, 1 + P]
        states = encoder.sequence_output_at(encoded, positions, inputs["padding_mask"])  # [B, (1 +) P, H]
        outputs = {"mlm": lm_head(states[:, 1:] if with_first else states)}  # [B, P, V]
        next_sentence_head = None
        if next_sentence:
            next_sentence_head = NextSentenceHead(
                kernel_initializer=bert_initializer(encoder.config.initializer_range),
                dtype=encoder.layer_dtype_policy,
                name="next_sentence_head",
            )
            pooled = encoder.pooler(states[:, :1]) if with_first else encoded["pooled_output"]  # [B, H]
            outputs["nsp"] = next_sentence_head(pooled)
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.lm_head = lm_head
        self.head_names = ["lm"]
        self.next_sentence_head = next_sentence_head
        self.next_sentence = bool(next_sentence)
        self.uses_pooled_output = self.next_sentence
        self.head_names = sorted(outputs)

    def _constructor_args(self):
        return {"next_sentence": self.next_sentence}


@keras.saving.register_keras_serializable(package="bertlayers")
class CausalLMPretrainer(PretrainerBase):
    """A left-to-right language model: a causal encoder predicting the next token everywhere.

    Inputs: the encoder's. Output: `lm` float32 logits `[batch, seq, V]`, position t
    predicting token t+1.

    Args:
      encoder: an encoder whose config has `causal=True`.
    """

    uses_pooled_output = False

    def __init__(
        self, encoder: keras.Model, name: str = "causal_lm_pretrainer", trainable: bool = True, **kwargs
    ) -> None:
        if not encoder.config.causal:
            raise ValueError(
                "CausalLMPretrainer needs a causal encoder (EncoderConfig.causal=True); with "
                "bidirectional attention every position could see the token it predicts."
            )
        inputs = encoder_inputs()
        encoded = encoder(inputs)
        lm_head = self._lm_head(encoder)
        outputs = {"lm": lm_head(encoded["sequence_output"])}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.lm_head = lm_head
        self.head_names = ["lm"]
