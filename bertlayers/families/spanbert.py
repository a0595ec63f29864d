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
import tensorflow as tf

from bertlayers.data.mlm_masking import span_boundaries
from bertlayers.data.pretraining_data import DataObjective, masked_lm_batch, normalized_weights
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.span_boundary_head import SpanBoundaryHead
from bertlayers.models.encoder_model import encoder_inputs
from bertlayers.models.pretrainer import PretrainerBase
from bertlayers.networks import build_encoder
from bertlayers.networks.encoder_base import INPUT_NAMES
from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.utils.validation import POSITIVE_INT

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


# --- The recipe ---------------------------------------------------------------------------


def _boundary_features(sequence_length, max_predictions_per_seq):
    return {name: max_predictions_per_seq for name in BOUNDARY_INPUTS}


def _record_boundaries(masked_example, token_ids, context):
    return dict(zip(BOUNDARY_INPUTS, span_boundaries(masked_example.positions, len(token_ids))))


def _spanbert_batch(features, seed, context):
    x, labels, weights = masked_lm_batch(features, seed, context, dynamic=False)
    left, right = features["span_left_positions"], features["span_right_positions"]
    lengths = tf.reduce_sum(features["input_mask"], axis=1, keepdims=True)  # [B, 1]
    # A span at the edge has no outside token: skipped, as the reference does.
    inside = tf.cast((left >= 0) & (right < lengths), tf.float32)
    last = tf.shape(features["input_ids"])[1] - 1
    x["span_left_positions"] = tf.maximum(left, 0)
    x["span_right_positions"] = tf.minimum(right, last)
    x["span_offsets"] = features["span_offsets"]
    y = {"mlm": labels, "sbo": labels}
    return x, y, {"mlm": normalized_weights(weights), "sbo": normalized_weights(weights * inside)}


OBJECTIVE = DataObjective(
    examples="single",
    masking="static",
    batch_inputs=_spanbert_batch,
    masking_strategy="span",
    extra_features=_boundary_features,
    record_extras=_record_boundaries,
)


def build_pretrainer(encoder_config, dtype, options):
    encoder = build_encoder(encoder_config, dtype=dtype, name="encoder")
    return SpanBertPretrainer(encoder, max_span_length=options["max_span_length"])


RECIPE = register_recipe(
    Recipe(
        "spanbert",
        "span masking, masked LM + span-boundary objective, single segments (Joshi et al. 2020)",
        OBJECTIVE,
        build_pretrainer,
        options={"max_span_length": Option(30, POSITIVE_INT, "longest span the boundary head scores")},
        report=("sbo_loss", "sbo_accuracy", "mlm_accuracy"),
    )
)
