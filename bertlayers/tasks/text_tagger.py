"""`TextTagger`: a checkpoint's tokenizer and a `TokenClassifier` over its encoder, with words in
and a tag a word out (named entities, parts of speech).

    tagger = TextTagger.from_checkpoint("path/to/checkpoint", tags=["O", "B-PER", "I-PER"])
    tagger.fit([["Ada", "Lovelace", "wrote"]], [["B-PER", "I-PER", "O"]], epochs=3)
    tagger.predict(["Ada Lovelace wrote the first program."])   # [[("Ada", "B-PER"), ...]]

A word's tag sits on its first piece, as in BERT's NER (`bertlayers.task_data.ner`); with
`crf=True` a linear-chain CRF decodes the path over every piece. Raw strings are split into words at
spaces and punctuation (as BERT's basic tokenizer does); lists of words are taken as they are.
"""

import re
from collections.abc import Sequence
from typing import Optional

import keras

from bertlayers.convert.loading import load_encoder, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.export.saved_model import export_for_serving
from bertlayers.models.token_classifier import TokenClassifier
from bertlayers.networks.input_limits import input_limits
from bertlayers.task_data.ner import decode_tags, encode_sentences, word_tags
from bertlayers.tasks.inputs import examples_given, text_list
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.task_fitting import compile_task_model, fit_settings, fit_task_model, optimizer_steps

# A word: a run of letters and digits, or one other non-space character (punctuation).
_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def words_of(text: str) -> list:
    """`text` split into words at spaces and punctuation ("Paris, 1988." → Paris , 1988 .)."""
    return _WORDS.findall(text)


class TextTagger:
    """Tag the words of texts with a fine-tuned encoder.

    Args:
      model: a `TokenClassifier` with `tag_names`, the vocabulary it reads recorded on it
        (`from_checkpoint` and `load` see to it).
      sequence_length: pieces per text; words past it are cut (and tagged "O").

    Example (a few steps on WNUT-2016 tweets would learn; here the shapes):

    >>> from bertlayers.utils.assets import minilm_path
    >>> tagger = TextTagger.from_checkpoint(minilm_path(), ["O", "B-LOC", "I-LOC"], sequence_length=16)
    >>> [word for word, tag in tagger.predict(["Flights to New York, today."])[0]]
    ['Flights', 'to', 'New', 'York', ',', 'today', '.']
    """

    def __init__(self, model: TokenClassifier, sequence_length: int = 128):
        if not isinstance(model, TokenClassifier) or not model.tag_names:
            raise ValueError("TextTagger takes a TokenClassifier with tag_names.")
        vocabulary = recorded_tokenizer(model)
        if vocabulary is None:
            raise ValueError("The tagger has no vocabulary recorded: load it with from_checkpoint or load.")
        self.model = model
        self.sequence_length = input_limits(model).check_sequence_length(sequence_length)
        self.tokenizer = vocabulary.in_graph()

    @classmethod
    def from_checkpoint(
        cls, source: str, tags: Sequence[str], sequence_length: int = 128, crf: bool = False, dropout: float = 0.1
    ) -> "TextTagger":
        """A new tagger over the pretrained encoder at `source` (`bertlayers.convert.load_encoder`).
        `tags`: the tag set ("O" among them with `crf`, which labels every piece)."""
        tags = [str(tag) for tag in tags]
        if len(tags) < 2 or len(set(tags)) != len(tags):
            raise ValueError(f"tags must be two or more distinct names, got {tags}.")
        encoder = load_encoder(source)
        if recorded_tokenizer(encoder) is None:
            raise ValueError(f"{source} has no tokenizer recorded.")
        model = TokenClassifier(encoder, tag_names=tags, crf=crf, dropout=dropout)
        return cls(record_tokenizer(model, recorded_tokenizer(encoder)), sequence_length)

    @classmethod
    def load(cls, path: str, sequence_length: int | None = None) -> "TextTagger":
        """A tagger saved with `save`, at the sequence length it was saved with (`sequence_length`
        sets another; 128 where the file records none)."""
        return cls(load_model_file(path), sequence_length or saved_settings(path).get("sequence_length", 128))

    @property
    def tags(self) -> list:
        return list(self.model.tag_names)

    def _sentences(self, texts, tags=None):
        texts = text_list(texts, "texts", words=True)
        if tags is not None:
            tags = examples_given(text_list(tags, "tags", words=True), "tags")
            if len(tags) != len(examples_given(texts, "texts")):
                raise ValueError(f"{len(texts)} texts for {len(tags)} lists of tags.")
        sentences = []
        for row, text in enumerate(texts):
            words = words_of(text) if isinstance(text, str) else [str(word) for word in text]
            if tags is None:
                sentences.append([(word, self.tags[0]) for word in words])
                continue
            if len(tags[row]) != len(words):
                raise ValueError(f"text {row + 1} has {len(words)} words but {len(tags[row])} tags.")
            sentences.append(list(zip(words, map(str, tags[row]))))
        return sentences

    def fit(
        self,
        texts: Sequence,
        tags: Sequence[Sequence[str]],
        validation: Optional[tuple] = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        **settings,
    ) -> keras.callbacks.History:
        """Fine-tune on `texts` (strings, or lists of words) and their tags, one a word, as the
        fine-tuning runners do (`bertlayers.training.task_fitting`): AdamW with 10% warmup and
        linear decay, random batches cut to their longest text.

        Args:
          validation: (texts, tags), validated after every epoch; the tagger ends with the weights
            of the epoch with the lowest validation loss (`keep_best=False` keeps the last).
          callbacks: Keras callbacks for `fit`.
          settings: `FitSettings` fields: epochs (3), batch_size (32), learning_rate (5e-4),
            keep_best, early_stopping, seed, verbose, ...
        """
        settings = fit_settings(settings, epochs=3, batch_size=32, learning_rate=5e-4)
        train = self._examples(texts, tags, "fit")
        if validation is not None:
            validation = self._examples(*validation, "validate")
        compile_task_model(self.model, optimizer_steps(len(train[0]["token_ids"]), settings), settings)
        return fit_task_model(self.model, train, settings, validation, callbacks)

    def _examples(self, texts, tags, what):
        """(x, y, sample_weight) of tagged texts; a word's tag on its first piece, or on every
        piece for the CRF."""
        crf = self.model.crf is not None
        x, labels, weights, _ = encode_sentences(
            self._sentences(texts, tags), self.tokenizer, self.sequence_length, self.tags, what, every_piece=crf
        )
        return (x, {"tags": labels}, None) if crf else (x, {"logits": labels}, {"logits": weights})

    def predict(self, texts: Sequence, batch_size: int = 32) -> list:
        """For each text, its [(word, tag), ...]."""
        return self._predict_with(texts, lambda x: predict_by_length(self.model, x, batch_size=batch_size, verbose=0))

    def _predict_with(self, texts, outputs_of) -> list:
        """`predict` with the model's outputs from `outputs_of(inputs)`: this model's, or another
        form of it (`bertlayers.tasks.precision_check`: its TFLite file)."""
        sentences = self._sentences(texts)
        if not sentences:
            return []
        x, _, _, starts = encode_sentences(sentences, self.tokenizer, self.sequence_length, self.tags, "predict")
        outputs = outputs_of(x)
        if self.model.crf is not None:
            predicted = word_tags(outputs["tags"], starts, self.tags)
        else:
            predicted = decode_tags(outputs["logits"], starts, self.tags)
        return [[(word, tag) for (word, _), tag in zip(sentence, row)] for sentence, row in zip(sentences, predicted)]

    def save(self, path: str) -> None:
        """The model, its tags and vocabulary, to a `.keras` file (atomically)."""
        save_model(self.model, path, settings={"sequence_length": self.sequence_length})

    def export(self, base_dir: str, name: str, **settings) -> dict:
        """`bertlayers.export.export_for_serving`: NAME (ids in) and NAME_text (text in: `tags` a
        piece, and the `token_ids` they belong to)."""
        settings.setdefault("sequence_length", self.sequence_length)
        return export_for_serving(self.model, name, base_dir=base_dir, **settings)


__all__ = ["TextTagger", "words_of"]
