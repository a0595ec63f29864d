"""Models: encoders with heads, for pretraining and for tasks."""

from bertlayers.models.encoder_model import EncoderModel
from bertlayers.models.pretrainer import BertPretrainer, CausalLMPretrainer
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.models.span_predictor import SpanPredictor
from bertlayers.models.token_classifier import TokenClassifier
from bertlayers.models.warm_start import load_encoder, load_model_file, reinitialized

__all__ = [
    "BertPretrainer",
    "CausalLMPretrainer",
    "EncoderModel",
    "SequenceClassifier",
    "SpanPredictor",
    "TokenClassifier",
    "load_encoder",
    "load_model_file",
    "reinitialized",
]
