"""`TextClassifier`: a checkpoint's tokenizer and a `SequenceClassifier` over its encoder, with
strings in and labels out.

    classifier = TextClassifier.from_checkpoint("path/to/checkpoint", labels=["negative", "positive"])
    classifier.fit(texts, labels, epochs=3)
    classifier.predict(["A joy from start to finish."])   # [{"label": ..., "probabilities": {...}}]
    classifier.export("savedmodels", "sentiment")          # ids in and text in, for TF Serving

The Keras model is `classifier.model` (ids in, logits out), for anything the wrapper does not do.
"""

import logging
from collections.abc import Sequence
from typing import Optional

import keras
import numpy as np

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.loading import head_pooling, load_encoder, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.export.saved_model import export_for_serving
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.networks.input_limits import input_limits
from bertlayers.tasks.inputs import examples_given, text_list
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.task_fitting import compile_task_model, fit_settings, fit_task_model, optimizer_steps

logger = logging.getLogger(__name__)


class TextClassifier:
    """Classify texts (or text pairs) with a fine-tuned encoder.

    Args:
      model: a `SequenceClassifier` with `label_names`, the vocabulary it reads recorded on it
        (`bertlayers.convert.record_tokenizer`; `from_checkpoint` and `load` see to it).
      sequence_length: pieces per example; longer texts are truncated.

    Example (the bundled MiniLM, a few steps on real review snippets):

    >>> from bertlayers.utils.assets import minilm_path, rotten_tomatoes_snippets
    >>> texts, labels = zip(*rotten_tomatoes_snippets()[:64])
    >>> classifier = TextClassifier.from_checkpoint(minilm_path(), ["rotten", "fresh"], sequence_length=32)
    >>> history = classifier.fit(list(texts), list(labels), epochs=1, batch_size=16, verbose=0)
    >>> prediction = classifier.predict(["A gorgeous, witty, seductive movie."])[0]
    >>> prediction["label"] in ("rotten", "fresh"), round(sum(prediction["probabilities"].values()), 4)
    (True, 1.0)
    """

    def __init__(self, model: SequenceClassifier, sequence_length: int = 128):
        if not isinstance(model, SequenceClassifier) or not model.label_names:
            raise ValueError("TextClassifier takes a SequenceClassifier with label_names.")
        vocabulary = recorded_tokenizer(model)
        if vocabulary is None:
            raise ValueError(
                "The classifier has no vocabulary recorded: load it with from_checkpoint or load, or record the "
                "one it was trained with (bertlayers.convert.record_tokenizer)."
            )
        self.model = model
        self.sequence_length = input_limits(model).check_sequence_length(sequence_length)
        self.packer = vocabulary.packer(self.sequence_length)

    @classmethod
    def from_checkpoint(
        cls,
        source: str,
        labels: Sequence[str],
        sequence_length: int = 128,
        pooling: str = "auto",
        dropout: float = 0.1,
    ) -> "TextClassifier":
        """A new classifier over the pretrained encoder at `source` (a Hugging Face folder or Hub
        name, a `.keras` model or a pretraining run's folder: `bertlayers.convert.load_encoder`), with its
        tokenizer. `pooling` "auto" reads what the checkpoint was trained with (mean for a
        sentence-transformers folder), else the encoder's pooler."""
        labels = [str(label) for label in labels]
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise ValueError(f"labels must be two or more distinct names, got {labels}.")
        source = local_or_hub(source)  # a Hub name resolved once
        encoder = load_encoder(source)
        if recorded_tokenizer(encoder) is None:
            raise ValueError(
                f"{source} has no tokenizer recorded: save the encoder with bertlayers.convert.save_model after "
                "record_tokenizer, or start from a checkpoint folder with its tokenizer files."
            )
        pooling = head_pooling(source, pooling)
        model = SequenceClassifier(encoder, len(labels), label_names=labels, pooling=pooling, dropout=dropout)
        return cls(record_tokenizer(model, recorded_tokenizer(encoder)), sequence_length)

    @classmethod
    def load(cls, path: str, sequence_length: int | None = None) -> "TextClassifier":
        """A classifier saved with `save` (or a runner's model.keras), at the sequence length it was
        saved with (`sequence_length` sets another; 128 where the file records none)."""
        return cls(load_model_file(path), sequence_length or saved_settings(path).get("sequence_length", 128))

    @property
    def labels(self) -> list:
        return list(self.model.label_names)

    def inputs(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> dict:
        """The model's inputs for `texts` (and second texts `pairs`): int32 arrays `[n, sequence_length]`."""
        texts = text_list(texts, "texts")
        if pairs is None:
            return pack_in_chunks(self.packer, texts)
        pairs = text_list(pairs, "pairs")
        if len(pairs) != len(texts):
            raise ValueError(f"pairs has {len(pairs)} texts for {len(texts)} texts.")
        return pack_in_chunks(self.packer, texts, pairs)

    def fit(
        self,
        texts: Sequence[str],
        labels: Sequence[str],
        pairs: Optional[Sequence[str]] = None,
        validation: Optional[tuple] = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        **settings,
    ) -> keras.callbacks.History:
        """Fine-tune on `texts` (and `pairs`) and their `labels` (names among `self.labels`), as the
        fine-tuning runners do (`bertlayers.training.task_fitting`): AdamW with 10% warmup and
        linear decay, random batches cut to their longest text.

        Args:
          validation: (texts, labels) or (texts, pairs, labels), validated after every epoch; the
            classifier ends with the weights of the epoch with the lowest validation loss
            (`keep_best=False` keeps the last).
          callbacks: Keras callbacks for `fit`.
          settings: `FitSettings` fields: epochs (3), batch_size (32), learning_rate (5e-5),
            warmup_proportion, weight_decay, layerwise_decay, keep_best, early_stopping, seed,
            verbose, ...
        """
        settings = fit_settings(settings, epochs=3, batch_size=32, learning_rate=5e-5)
        train = (
            self.inputs(examples_given(text_list(texts, "texts"), "texts"), pairs),
            {"logits": self._label_ids(labels)},
        )
        if validation is not None:
            *held_texts, held_labels = validation
            validation = (self.inputs(*held_texts), {"logits": self._label_ids(held_labels)})
        compile_task_model(self.model, optimizer_steps(len(train[1]["logits"]), settings), settings)
        return fit_task_model(self.model, train, settings, validation, callbacks)

    def predict_proba(
        self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None, batch_size: int = 32
    ) -> np.ndarray:
        """Class probabilities `[n, num_labels]`, in the order of `self.labels`."""
        return self._probabilities(
            texts, pairs, lambda x: predict_by_length(self.model, x, batch_size=batch_size, verbose=0)
        )

    def _probabilities(self, texts, pairs, outputs_of) -> np.ndarray:
        """`predict_proba` with the model's outputs from `outputs_of(inputs)`: this model's, or
        another form of it (`bertlayers.tasks.precision_check`: its TFLite file)."""
        if not text_list(texts, "texts"):
            return np.zeros((0, len(self.labels)), "float32")
        logits = outputs_of(self.inputs(texts, pairs))["logits"]
        return keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))

    def predict(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None, batch_size: int = 32) -> list:
        """One {"label", "probabilities": {label: p}} a text."""
        labels = self.labels
        return [
            {"label": labels[int(row.argmax())], "probabilities": {n: float(p) for n, p in zip(labels, row)}}
            for row in self.predict_proba(texts, pairs, batch_size)
        ]

    def save(self, path: str) -> None:
        """The model, its labels, vocabulary and sequence length, to a `.keras` file (atomically)."""
        save_model(self.model, path, settings={"sequence_length": self.sequence_length})

    def export(self, base_dir: str, name: str, **settings) -> dict:
        """`bertlayers.export.export_for_serving`: NAME (ids in) and NAME_text (text in) under
        `base_dir`, at this classifier's sequence length."""
        settings.setdefault("sequence_length", self.sequence_length)
        return export_for_serving(self.model, name, base_dir=base_dir, **settings)

    def _label_ids(self, labels):
        index = {name: i for i, name in enumerate(self.labels)}
        if labels is None or isinstance(labels, (str, bytes)):
            raise TypeError(f"labels must be a list of label names, got {type(labels).__name__}.")
        labels = [str(label) for label in labels]
        unknown = sorted(set(labels) - set(index))
        if unknown:
            raise ValueError(f"labels {unknown[:5]} are not among the classifier's {self.labels}.")
        return np.array([index[label] for label in labels], "int32")
