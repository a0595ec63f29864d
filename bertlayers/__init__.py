"""bertlayers: Keras 3 layers for the BERT family of pretrained language models.

Layers (`bertlayers.layers`) compose into networks (`bertlayers.networks`: encoders) and
models (`bertlayers.models`: pretrainers, task models); each family beyond BERT's own
(ELECTRA, SpanBERT, XLNet) lives in one module of `bertlayers.families`; `bertlayers.training` trains them
and `bertlayers.runs` drives whole runs, `bertlayers.convert` loads real pretrained checkpoints and
`bertlayers.export` serves them. `bertlayers.utils` is the bottom tier (atomic files, validated ranges).
"""

__version__ = "0.1.0"

from bertlayers.startup import import_tensorflow_quietly

import_tensorflow_quietly()  # before anything below loads TensorFlow

# Importing the package registers every serializable class (layers, networks, models, the
# optimizer and schedule), so `keras.saving.load_model` finds them after `import bertlayers`.
from bertlayers import layers  # noqa: F401
from bertlayers import networks  # noqa: F401
from bertlayers import models  # noqa: F401
from bertlayers import training  # noqa: F401
from bertlayers import families  # noqa: F401
from bertlayers import convert  # noqa: F401
from bertlayers.networks import AlbertEncoder, BertEncoder, EncoderConfig  # noqa: F401
from bertlayers.networks.presets import get_preset, preset_names  # noqa: F401

# Every family is imported now: the names the public namespaces forward to the families
# (`FROM_FAMILIES`) become plain attributes there, as documentation tools expect.
for _namespace in (layers, networks, convert):
    _namespace.__dict__.update({_name: getattr(_namespace, _name) for _name in _namespace.FROM_FAMILIES})
