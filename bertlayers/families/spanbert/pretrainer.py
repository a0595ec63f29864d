"""SpanBERT (Joshi et al. 2020): mask contiguous spans of whole words and predict every
masked token twice, from its own position (masked LM) and from the two tokens just
outside its span plus its offset inside it (span-boundary objective, SBO).

Dimensions: B batch, S sequence, P masked predictions, V vocabulary.

    loss = MLM(sequence[masked_positions]) + SBO(sequence[left], sequence[right], offset)

Records are google-research/bert's, with the spans' boundaries as extra features
(`span_left_positions`, `span_right_positions`, `span_offsets`, each `[P]`), written when
the spans are chosen. Single segments, no NSP (the paper found single segments better).
Spans touching the sequence edge would have no outside token; the reference skips them
(weight 0). With [CLS] and [SEP] framing every example, which are never masked, none do.
"""

import keras

from bertlayers.families.spanbert.span_boundary_head import SpanBoundaryHead
from bertlayers.layers.initializers import bert_initializer
from bertlayers.models.encoder_model import encoder_inputs
from bertlayers.models.pretrainer import PretrainerBase
from bertlayers.networks.encoder_base import INPUT_NAMES

BOUNDARY_INPUTS = ("span_left_positions", "span_right_positions", "span_offsets")


@keras.saving.register_keras_serializable(package="bertlayers")
class SpanBertPretrainer(PretrainerBase):
    """Encoder + masked-LM head + span-boundary head, both tied to the token embedding.

    Inputs: the encoder's, `masked_positions`, and the boundary inputs `span_left_positions`,
    `span_right_positions`, `span_offsets` (each int `[B, P]`, aligned with the positions).
    Outputs: `mlm` and `sbo` float32 logits `[B, P, V]`, both trained against the original
    tokens (Keras sums the two losses: MLM + SBO).

    Args:
      encoder: a `BertEncoder`.
      max_span_length: rows of the SBO head's offset table.
    """

    uses_pooled_output = False

    def __init__(self, encoder, max_span_length=30, name="spanbert_pretrainer", trainable=True, **kwargs):
        inputs = encoder_inputs()
        for input_name in ("masked_positions",) + BOUNDARY_INPUTS:
            inputs[input_name] = keras.Input(shape=(None,), dtype="int32", name=input_name)
        sequence = encoder({name: inputs[name] for name in INPUT_NAMES})["sequence_output"]  # [B, S, H]
        lm_head = self._lm_head(encoder)
        boundary_head = SpanBoundaryHead(
            token_embedding=encoder.token_embedding,
            max_span_length=max_span_length,
            layer_norm_epsilon=encoder.config.layer_norm_epsilon,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="span_boundary_head",
        )
        outputs = {
            "mlm": lm_head(sequence, inputs["masked_positions"]),  # [B, P, V]
            "sbo": boundary_head(sequence, *(inputs[name] for name in BOUNDARY_INPUTS)),  # [B, P, V]
        }
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.lm_head = lm_head
        self.boundary_head = boundary_head
        self.max_span_length = int(max_span_length)
        self.head_names = ["mlm", "sbo"]

    def _constructor_args(self):
        return {"max_span_length": self.max_span_length}
