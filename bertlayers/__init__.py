"""bertlayers: Keras 3 layers for the BERT family of pretrained language models.

## Quickstart

A checkpoint folder fine-tuned on texts and labels, predicting on strings, exported for TF Serving
(`bertlayers.tasks.TextClassifier`):

    from bertlayers.tasks import TextClassifier
    classifier = TextClassifier.from_checkpoint("path/to/checkpoint", labels=["rotten", "fresh"])
    classifier.fit(texts, labels, epochs=2)
    classifier.predict(["A gorgeous, witty, seductive movie."])
    classifier.export("savedmodels", "sentiment")

Checkpoints load with `bertlayers.convert.load_checkpoint` (model, encoder and tokenizer of a
Hugging Face folder) and save back with `bertlayers.convert.save_huggingface`.

## The packages

Layers (`bertlayers.layers`) compose into networks (`bertlayers.networks`: encoders) and
models (`bertlayers.models`: pretrainers, task models); each family beyond BERT's own
lives in its folder of `bertlayers.families`; `bertlayers.training` trains them,
`bertlayers.runs` drives whole runs, `bertlayers.tasks` puts a tokenizer and a task model together,
`bertlayers.convert` loads real pretrained checkpoints and saves them back, and
`bertlayers.export` serves them. `bertlayers.utils` is the bottom tier (atomic files, validated ranges).

Layers, networks, models and optimizers run on any Keras 3 backend (`KERAS_BACKEND=jax` included,
with or without TensorFlow installed); data pipelines, checkpoint folders with their tokenizers,
export and tf.distribute need TensorFlow (`bertlayers.startup`).

## Guides

In the repository's `docs/`: `docs/architecture.md` (the tiers), `docs/checkpoints.md` (loading
and saving checkpoints), `docs/pretraining.md` (recipes, corpora, continued pretraining),
`docs/fine-tuning.md` (the runners), `docs/serving.md` (TF Serving, Docker, gRPC, TFLite),
`docs/modern-encoders.md`, `docs/backends.md` (JAX), `docs/bad-input.md`, `docs/performance.md`.
"""

__version__ = "0.1.0"

import importlib

from bertlayers.startup import backend_is_tensorflow, import_tensorflow_quietly, tensorflow_available

if backend_is_tensorflow():
    import_tensorflow_quietly()  # before anything below loads TensorFlow

# Importing the package registers every serializable class (layers, networks, models, the
# optimizer and schedule), so `keras.saving.load_model` finds them after `import bertlayers`.
from bertlayers import (
    families,  # noqa: F401
    layers,  # noqa: F401
    models,  # noqa: F401
    networks,  # noqa: F401
    training,  # noqa: F401
)

# The public face: the core's entry points and every family's encoder, by name.
from bertlayers.families.albert import AlbertEncoder  # noqa: F401
from bertlayers.families.bert import BertEncoder  # noqa: F401
from bertlayers.families.xlnet import XLNetEncoder  # noqa: F401
from bertlayers.networks import EncoderConfig, build_encoder  # noqa: F401
from bertlayers.networks.presets import get_preset, preset_names  # noqa: F401

# Names that moved into their family's folder stay importable where they were first documented
# (`from bertlayers.networks import BertEncoder`). They are set here, once every family is
# imported, and listed in no lower namespace's `__all__`: a lower tier promises no family's names.
MOVED_NAMES = {
    "bertlayers.networks": {
        "AlbertEncoder": "bertlayers.families.albert",
        "BertEncoder": "bertlayers.families.bert",
        "XLNetEncoder": "bertlayers.families.xlnet",
    },
    "bertlayers.layers": {
        "GeneratorCorruption": "bertlayers.families.electra",
        "MaskEmbedding": "bertlayers.families.xlnet",
        "RelativeAttention": "bertlayers.families.xlnet",
        "RelativeEncoderBlock": "bertlayers.families.xlnet",
        "RelativePositionEncoding": "bertlayers.families.xlnet",
        "ReplacedTokenDetectionHead": "bertlayers.families.electra",
        "SpanBoundaryHead": "bertlayers.families.spanbert",
        "TiedOutputProjection": "bertlayers.families.xlnet",
        "TwoStreamMasks": "bertlayers.families.xlnet",
    },
    "bertlayers.convert": {
        "load_google_albert": "bertlayers.families.albert",
        "load_google_bert": "bertlayers.families.bert",
        "load_huggingface_albert": "bertlayers.families.albert",
        "load_huggingface_bert": "bertlayers.families.bert",
        "load_huggingface_distilbert": "bertlayers.families.distilbert",
        "load_huggingface_electra": "bertlayers.families.electra",
        "load_huggingface_roberta": "bertlayers.families.roberta",
        "load_huggingface_xlnet": "bertlayers.families.xlnet",
    },
}
if tensorflow_available():  # checkpoints come with their tokenizers, which are TensorFlow graphs
    from bertlayers import convert  # noqa: F401
else:
    del MOVED_NAMES["bertlayers.convert"]
for _namespace, _names in MOVED_NAMES.items():
    for _name, _module in _names.items():
        setattr(importlib.import_module(_namespace), _name, getattr(importlib.import_module(_module), _name))
