"""XLNet (Yang et al. 2019): its relative-attention layers, encoder, two-stream pretrainer,
permutation-LM data, presets and Hugging Face checkpoints, in one folder.

Importing it registers the encoder (architecture "xlnet"), the presets `xlnet_base` and
`xlnet_large`, the recipe "xlnet" and transformers' model_type "xlnet".
"""

from bertlayers.families.xlnet import presets  # noqa: F401  (registers xlnet_base, xlnet_large)
from bertlayers.families.xlnet.encoder import QueryStream, RelativeStack, XLNetEncoder, relative_stack
from bertlayers.families.xlnet.mask_embedding import MaskEmbedding
from bertlayers.families.xlnet.pretrainer import XLNetPretrainer
from bertlayers.families.xlnet.relative_attention import RelativeAttention, relative_shift
from bertlayers.families.xlnet.relative_encoder_block import RelativeEncoderBlock
from bertlayers.families.xlnet.relative_position_encoding import RelativePositionEncoding
from bertlayers.families.xlnet.tied_output_projection import TiedOutputProjection
from bertlayers.families.xlnet.two_stream_masks import TwoStreamMasks
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoints with their tokenizer; tf.data objective
    from bertlayers.families.xlnet.checkpoint import load_huggingface_xlnet, xlnet_config_from_huggingface
    from bertlayers.families.xlnet.permutation_lm import choose_plm_targets, factorization_masks, xlnet_layout
    from bertlayers.families.xlnet.recipe import RECIPE, TARGET_FEATURE, plm_objective, xlnet_config
    from bertlayers.families.xlnet.tokenizer import xlnet_checkpoint_tokenizer, xlnet_input_layout

__all__ = [
    "MaskEmbedding",
    "TiedOutputProjection",
    "QueryStream",
    "RECIPE",
    "RelativeAttention",
    "RelativeEncoderBlock",
    "RelativePositionEncoding",
    "RelativeStack",
    "TARGET_FEATURE",
    "TwoStreamMasks",
    "XLNetEncoder",
    "XLNetPretrainer",
    "choose_plm_targets",
    "factorization_masks",
    "load_huggingface_xlnet",
    "plm_objective",
    "relative_shift",
    "relative_stack",
    "xlnet_checkpoint_tokenizer",
    "xlnet_input_layout",
    "xlnet_config",
    "xlnet_config_from_huggingface",
    "xlnet_layout",
]
