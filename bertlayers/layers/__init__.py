"""Keras layers of the BERT family, each registered under the "bertlayers" package.

The layers one family alone uses live in its folder (`bertlayers.families.xlnet`, ...) and are
named here too: `import bertlayers` sets them once every family is imported (`FROM_FAMILIES`).
"""

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.bidirectional_lstm import BidirectionalLSTM
from bertlayers.layers.classification_head import ClassificationHead, NextSentenceHead
from bertlayers.layers.crf import LinearChainCRF
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.gated_feed_forward import GatedFeedForward
from bertlayers.layers.mask_embedding import MaskEmbedding
from bertlayers.layers.masked_lm_head import MaskedLMHead
from bertlayers.layers.masking import causal_attention_mask, merge_attention_masks
from bertlayers.layers.multi_head_attention import MultiHeadAttention
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.position_embedding import PositionEmbedding
from bertlayers.layers.scalar_mix import ScalarMix
from bertlayers.layers.sequence_pooling import SequencePooling
from bertlayers.layers.span_prediction_head import SpanPredictionHead
from bertlayers.layers.tied_output_projection import TiedOutputProjection
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock

FROM_FAMILIES = {
    "GeneratorCorruption": "bertlayers.families.electra",
    "ReplacedTokenDetectionHead": "bertlayers.families.electra",
    "SpanBoundaryHead": "bertlayers.families.spanbert",
    "RelativeAttention": "bertlayers.families.xlnet",
    "RelativeEncoderBlock": "bertlayers.families.xlnet",
    "RelativePositionEncoding": "bertlayers.families.xlnet",
    "TwoStreamMasks": "bertlayers.families.xlnet",
}

__all__ = [
    "BertEmbeddings",
    "BidirectionalLSTM",
    "ClassificationHead",
    "FactorizedEmbedding",
    "GatedFeedForward",
    "GeneratorCorruption",
    "LinearChainCRF",
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
    "SequencePooling",
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
