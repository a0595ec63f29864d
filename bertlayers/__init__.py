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

if tensorflow_available():  # checkpoints come with their tokenizers, which are TensorFlow graphs
    from bertlayers import convert  # noqa: F401
