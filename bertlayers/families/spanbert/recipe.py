"""SpanBERT's pretraining recipe: span-masked records that carry each span's boundaries."""

from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.families.spanbert.pretrainer import BOUNDARY_INPUTS, SpanBertPretrainer
from bertlayers.families.spanbert.span_boundaries import span_boundaries
from bertlayers.networks import build_encoder
from bertlayers.pretraining_data.objectives import DataObjective, masked_lm_batch, normalized_weights
from bertlayers.startup import require_tensorflow
from bertlayers.utils.validation import POSITIVE_INT

tf = require_tensorflow(__name__)


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
