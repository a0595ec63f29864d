"""Keras layers any encoder composes, each registered under the "bertlayers" package.

The layers one family alone uses live in its folder (`bertlayers.families.xlnet`, ...).
"""

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.bias_free_layer_norm import BiasFreeLayerNorm
from bertlayers.layers.bidirectional_lstm import BidirectionalLSTM
from bertlayers.layers.classification_head import ClassificationHead, NextSentenceHead
from bertlayers.layers.crf import LinearChainCRF
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.gated_feed_forward import GatedFeedForward
from bertlayers.layers.late_interaction import MaxSimScores, QueryExpansion, ScoredTokens, maxsim
from bertlayers.layers.masked_lm_head import MaskedLMHead
from bertlayers.layers.masking import causal_attention_mask, merge_attention_masks
from bertlayers.layers.mean_probabilities import MeanProbabilities
from bertlayers.layers.mixture_of_experts import MixtureOfExperts, load_balancing_loss
from bertlayers.layers.multi_head_attention import MultiHeadAttention
from bertlayers.layers.packed_rows import PackedRows
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.position_embedding import PositionEmbedding
from bertlayers.layers.rotary_attention import RotaryAttention
from bertlayers.layers.scalar_mix import ScalarMix
from bertlayers.layers.sequence_pooling import SequencePooling, UnitLength
from bertlayers.layers.span_prediction_head import SpanPredictionHead
from bertlayers.layers.splade_pooling import SpladePooling, flops_regularizer
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "BertEmbeddings",
    "BiasFreeLayerNorm",
    "BidirectionalLSTM",
    "ClassificationHead",
    "FactorizedEmbedding",
    "GatedFeedForward",
    "LinearChainCRF",
    "MaskedLMHead",
    "MaxSimScores",
    "MeanProbabilities",
    "MixtureOfExperts",
    "MultiHeadAttention",
    "NextSentenceHead",
    "PackedRows",
    "Pooler",
    "PositionEmbedding",
    "QueryExpansion",
    "RotaryAttention",
    "ScalarMix",
    "ScoredTokens",
    "SequencePooling",
    "SpanPredictionHead",
    "SpladePooling",
    "TokenClassificationHead",
    "TokenEmbedding",
    "TransformerEncoderBlock",
    "UnitLength",
    "causal_attention_mask",
    "flops_regularizer",
    "load_balancing_loss",
    "maxsim",
    "merge_attention_masks",
]
