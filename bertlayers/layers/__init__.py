"""Keras layers of the BERT family, each registered under the "bertlayers" package."""

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.bidirectional_lstm import BidirectionalLSTM
from bertlayers.layers.classification_head import ClassificationHead, NextSentenceHead
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.gated_feed_forward import GatedFeedForward
from bertlayers.layers.mask_embedding import MaskEmbedding
from bertlayers.layers.masked_lm_head import MaskedLMHead
from bertlayers.layers.masking import causal_attention_mask, merge_attention_masks
from bertlayers.layers.multi_head_attention import MultiHeadAttention
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.position_embedding import PositionEmbedding
from bertlayers.layers.relative_attention import RelativeAttention
from bertlayers.layers.relative_encoder_block import RelativeEncoderBlock
from bertlayers.layers.relative_position_encoding import RelativePositionEncoding
from bertlayers.layers.replaced_token_detection import GeneratorCorruption, ReplacedTokenDetectionHead
from bertlayers.layers.scalar_mix import ScalarMix
from bertlayers.layers.span_boundary_head import SpanBoundaryHead
from bertlayers.layers.span_prediction_head import SpanPredictionHead
from bertlayers.layers.tied_output_projection import TiedOutputProjection
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock
from bertlayers.layers.two_stream_masks import TwoStreamMasks

__all__ = [
    "BertEmbeddings",
    "BidirectionalLSTM",
    "ClassificationHead",
    "FactorizedEmbedding",
    "GatedFeedForward",
    "GeneratorCorruption",
    "MaskEmbedding",
    "MaskedLMHead",
    "MultiHeadAttention",
    "NextSentenceHead",
    "Pooler",
    "PositionEmbedding",
    "RelativeAttention",
    "RelativeEncoderBlock",
    "RelativePositionEncoding",
    "ReplacedTokenDetectionHead",
    "ScalarMix",
    "SpanBoundaryHead",
    "SpanPredictionHead",
    "TiedOutputProjection",
    "TokenClassificationHead",
    "TokenEmbedding",
    "TransformerEncoderBlock",
    "TwoStreamMasks",
    "causal_attention_mask",
    "merge_attention_masks",
]
