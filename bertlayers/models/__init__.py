"""Models: encoders with heads, for pretraining and for tasks."""

from bertlayers.models.answer_token_scorer import AnswerTokenScorer
from bertlayers.models.distiller import Distiller
from bertlayers.models.dual_encoder import DualEncoder
from bertlayers.models.encoder_model import EncoderModel
from bertlayers.models.ensemble import ClassifierEnsemble
from bertlayers.models.multi_task import MultiTask, Task
from bertlayers.models.multi_vector_encoder import MultiVectorDualEncoder, MultiVectorEncoder
from bertlayers.models.multiple_choice import MultipleChoice
from bertlayers.models.predictor import compiled_predictor
from bertlayers.models.pretrainer import BertPretrainer, CausalLMPretrainer
from bertlayers.models.sentence_embedder import SentenceEmbedder
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.models.span_predictor import SpanPredictor
from bertlayers.models.sparse_encoder import SparseDualEncoder, SparseEncoder
from bertlayers.models.token_classifier import TokenClassifier

__all__ = [
    "AnswerTokenScorer",
    "BertPretrainer",
    "CausalLMPretrainer",
    "ClassifierEnsemble",
    "Distiller",
    "DualEncoder",
    "EncoderModel",
    "MultiTask",
    "MultiVectorDualEncoder",
    "MultiVectorEncoder",
    "MultipleChoice",
    "SentenceEmbedder",
    "SequenceClassifier",
    "SpanPredictor",
    "SparseDualEncoder",
    "SparseEncoder",
    "Task",
    "TokenClassifier",
    "compiled_predictor",
]
