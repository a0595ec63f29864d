"""bertlayers: Keras 3 layers for the BERT family of pretrained language models.

Layers (`bertlayers.layers`) compose into networks (`bertlayers.networks`: encoders) and
models (`bertlayers.models`: pretrainers, task models); each family beyond BERT's own
(ELECTRA, SpanBERT, XLNet) lives in one module of `bertlayers.families`; `bertlayers.training` trains them
and `bertlayers.runs` drives whole runs, `bertlayers.convert` loads real pretrained checkpoints and
`bertlayers.export` serves them. `bertlayers.utils` is the bottom tier (atomic files, validated ranges).

Layers, networks, models and optimizers run on any Keras 3 backend (`KERAS_BACKEND=jax` included,
with or without TensorFlow installed); data pipelines, checkpoint folders with their tokenizers,
export and tf.distribute need TensorFlow (`bertlayers.startup`).
"""

__version__ = "0.1.0"

import importlib

from bertlayers.startup import backend_is_tensorflow, import_tensorflow_quietly, tensorflow_available

if backend_is_tensorflow():
    import_tensorflow_quietly()  # before anything below loads TensorFlow

# Importing the package registers every serializable class (layers, networks, models, the
# optimizer and schedule), so `keras.saving.load_model` finds them after `import bertlayers`.
from bertlayers import layers  # noqa: F401
from bertlayers import networks  # noqa: F401
from bertlayers import models  # noqa: F401
from bertlayers import training  # noqa: F401
from bertlayers import families  # noqa: F401
from bertlayers.networks import AlbertEncoder, BertEncoder, EncoderConfig  # noqa: F401
from bertlayers.networks.presets import get_preset, preset_names  # noqa: F401

# The public namespaces list family classes (`FROM_FAMILIES`) that they cannot import: the
# families sit above them. Every family is imported now, so the names are set here. Importing any
# `bertlayers.*` package runs this file first, so a user never sees a namespace without them.
_namespaces = [layers, networks]
if tensorflow_available():  # checkpoints come with their tokenizers, which are TensorFlow graphs
    from bertlayers import convert  # noqa: F401

    _namespaces.append(convert)
for _namespace in _namespaces:
    for _name, _module in _namespace.FROM_FAMILIES.items():
        setattr(_namespace, _name, getattr(importlib.import_module(_module), _name))
