"""Keras layers of the BERT family, each registered under the "bertlayers" package."""

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.classification_head import ClassificationHead, NextSentenceHead
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.masked_lm_head import MaskedLMHead
from bertlayers.layers.masking import causal_attention_mask, merge_attention_masks
from bertlayers.layers.multi_head_attention import MultiHeadAttention
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.position_embedding import PositionEmbedding
from bertlayers.layers.scalar_mix import ScalarMix
from bertlayers.layers.span_prediction_head import SpanPredictionHead
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "BertEmbeddings",
    "ClassificationHead",
    "FactorizedEmbedding",
    "MaskedLMHead",
    "MultiHeadAttention",
    "NextSentenceHead",
    "Pooler",
    "PositionEmbedding",
    "ScalarMix",
    "SpanPredictionHead",
    "TokenClassificationHead",
    "TransformerEncoderBlock",
    "causal_attention_mask",
    "merge_attention_masks",
]
