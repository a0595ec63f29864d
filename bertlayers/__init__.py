"""bertlayers: Keras 3 layers for the BERT family of pretrained language models.

Layers (`bertlayers.layers`) compose into networks (`bertlayers.networks`: encoders) and
models; `bertlayers.convert` loads real pretrained checkpoints into them.
"""

__version__ = "0.1.0"

from bertlayers import layers  # noqa: F401  (registers every layer with Keras)
from bertlayers import networks  # noqa: F401
from bertlayers.networks import AlbertEncoder, BertEncoder, EncoderConfig  # noqa: F401
from bertlayers.networks.presets import get_preset, preset_names  # noqa: F401
