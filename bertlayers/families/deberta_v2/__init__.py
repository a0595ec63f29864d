"""DeBERTa-v2 and v3 (He et al. 2021, 2023): the encoder with disentangled attention, presets
and Hugging Face checkpoints (model_type "deberta-v2").

Importing it registers the encoder (architecture "deberta_v2"), the attention kind
"disentangled", the presets, the model_type and its tokenizer (`spm.model`), and the
pretraining recipe "deberta_v3" (replaced-token detection with gradient-disentangled embedding sharing).
"""

from bertlayers.families.deberta_v2 import presets  # noqa: F401  (registers the presets)
from bertlayers.families.deberta_v2.disentangled_attention import DisentangledAttention
from bertlayers.families.deberta_v2.embedding_sharing import DisentangledTokenEmbedding, SharedTableEmbeddings
from bertlayers.families.deberta_v2.encoder import DebertaV2Encoder
from bertlayers.families.deberta_v2.presets import deberta_v3_config
from bertlayers.families.deberta_v2.pretrainer import DebertaV3Pretrainer, deberta_v3_encoders
from bertlayers.families.deberta_v2.relative_position_table import RelativePositionTable
from bertlayers.families.deberta_v2.residual_convolution import ResidualConvolution
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.deberta_v2.checkpoint import (
        deberta_v2_config_from_huggingface,
        load_huggingface_deberta_v2,
    )
    from bertlayers.families.deberta_v2.recipe import RECIPE, deberta_v3_sized_like
    from bertlayers.families.deberta_v2.tokenizer import deberta_v2_checkpoint_tokenizer

__all__ = [
    "RECIPE",
    "DebertaV2Encoder",
    "DebertaV3Pretrainer",
    "DisentangledAttention",
    "RelativePositionTable",
    "ResidualConvolution",
    "DisentangledTokenEmbedding",
    "SharedTableEmbeddings",
    "deberta_v3_encoders",
    "deberta_v3_sized_like",
    "deberta_v2_checkpoint_tokenizer",
    "deberta_v2_config_from_huggingface",
    "deberta_v3_config",
    "load_huggingface_deberta_v2",
]
