"""SpanBERT (Joshi et al. 2020): the span-boundary head, the pretrainer, span boundaries for
the records and the recipe, in one folder. Its checkpoints are BERT's layout (`load_huggingface_bert`).

Importing it registers the recipe "spanbert".
"""

from bertlayers.families.spanbert.pretrainer import BOUNDARY_INPUTS, SpanBertPretrainer
from bertlayers.families.spanbert.span_boundaries import span_boundaries
from bertlayers.families.spanbert.span_boundary_head import SpanBoundaryHead
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # the recipe's tf.data objective
    from bertlayers.families.spanbert.recipe import OBJECTIVE, RECIPE

__all__ = ["BOUNDARY_INPUTS", "OBJECTIVE", "RECIPE", "SpanBertPretrainer", "SpanBoundaryHead", "span_boundaries"]
