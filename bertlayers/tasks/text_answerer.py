"""`TextAnswerer`: a checkpoint's tokenizer and a `SpanPredictor` over its encoder, with a question
and its context in and the answer's text out (SQuAD's extractive question answering).

    answerer = TextAnswerer.from_checkpoint("path/to/checkpoint")
    answerer.fit(questions, contexts, answers, epochs=2)        # answers: their text in the context
    answerer.predict(["When did the library move?"], ["The library moved in 1988."])
    # [{"answer": "1988", "score": ..., "start_char": 22}]

Contexts longer than a window are read in windows `doc_stride` pieces apart, and the answer is the
best span over all of them, on word boundaries (`bertlayers.task_data.squad`).
"""

from collections.abc import Sequence
from typing import Optional

import keras

from bertlayers.convert.loading import load_encoder, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.export.saved_model import export_for_serving
from bertlayers.models.span_predictor import SpanPredictor
from bertlayers.networks.input_limits import input_limits
from bertlayers.task_data.squad import SquadExample, decode_answers, make_windows
from bertlayers.tasks.inputs import examples_given, text_list
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.task_fitting import compile_task_model, fit_settings, fit_task_model, optimizer_steps


class TextAnswerer:
    """Answer questions from their contexts with a fine-tuned encoder.

    Args:
      model: a `SpanPredictor`, the vocabulary it reads recorded on it.
      sequence_length, doc_stride, max_query_length: the windows (pieces).
      max_answer_length: the longest answer, in pieces.
      allow_no_answer: SQuAD 2.0: answer "" where the null span scores above the best span.
    """

    def __init__(
        self,
        model: SpanPredictor,
        sequence_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        max_answer_length: int = 30,
        allow_no_answer: bool = False,
    ):
        if not isinstance(model, SpanPredictor):
            raise ValueError("TextAnswerer takes a SpanPredictor.")
        vocabulary = recorded_tokenizer(model)
        if vocabulary is None:
            raise ValueError("The model has no vocabulary recorded: load it with from_checkpoint or load.")
        self.model = model
        sequence_length = input_limits(model).check_sequence_length(sequence_length)
        self.windows = dict(sequence_length=sequence_length, doc_stride=doc_stride, max_query_length=max_query_length)
        self.max_answer_length = int(max_answer_length)
        self.allow_no_answer = bool(allow_no_answer)
        self.tokenizer = vocabulary.in_graph()

    @classmethod
    def from_checkpoint(cls, source: str, **settings) -> "TextAnswerer":
        """A new answerer over the pretrained encoder at `source` (`bertlayers.convert.load_encoder`);
        `settings` as the constructor's."""
        encoder = load_encoder(source)
        if recorded_tokenizer(encoder) is None:
            raise ValueError(f"{source} has no tokenizer recorded.")
        return cls(record_tokenizer(SpanPredictor(encoder), recorded_tokenizer(encoder)), **settings)

    @classmethod
    def load(cls, path: str, **settings) -> "TextAnswerer":
        """An answerer saved with `save`, with the windows and answer settings it was saved with
        (`settings`, as the constructor's, set others)."""
        return cls(load_model_file(path), **{**saved_settings(path), **settings})

    def _examples(self, questions, contexts, answers=None):
        questions, contexts = text_list(questions, "questions"), text_list(contexts, "contexts")
        if answers is not None:
            examples_given(questions, "questions")
            if isinstance(answers, (str, bytes)) or len(list(answers)) != len(questions):
                raise ValueError(f"answers must be a list of one answer a question ({len(questions)}).")
            answers = list(answers)
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions for {len(contexts)} contexts.")
        examples = []
        for row, (question, context) in enumerate(zip(questions, contexts)):
            spans, impossible = [], answers is not None and answers[row] in (None, "")
            if answers is not None and not impossible:
                answer = answers[row]
                text, start = answer if isinstance(answer, tuple) else (answer, context.find(answer))
                if start < 0 or context[start : start + len(text)] != text:
                    raise ValueError(f"example {row + 1}: the answer {text!r} is not in its context at {start}.")
                spans = [(text, start)]
            examples.append(SquadExample(str(row), question, context, spans, impossible))
        return examples

    def fit(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        answers: Sequence,
        validation: Optional[tuple] = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        **settings,
    ) -> keras.callbacks.History:
        """Fine-tune on questions, contexts and answers: the answer's text (its first place in the
        context), (text, start character), or "" / None for none (with `allow_no_answer`); as the
        fine-tuning runners do (`bertlayers.training.task_fitting`).

        Args:
          validation: (questions, contexts, answers), validated after every epoch; the answerer
            ends with the weights of the epoch with the lowest validation loss (`keep_best=False`
            keeps the last).
          callbacks: Keras callbacks for `fit`.
          settings: `FitSettings` fields: epochs (2), batch_size (16), learning_rate (5e-5),
            keep_best, early_stopping, seed, verbose, ...
        """
        settings = fit_settings(settings, epochs=2, batch_size=16, learning_rate=5e-5)
        train = self._windows(questions, contexts, answers)
        if validation is not None:
            validation = self._windows(*validation)
        compile_task_model(self.model, optimizer_steps(len(train[0]["token_ids"]), settings), settings)
        return fit_task_model(self.model, train, settings, validation, callbacks)

    def _windows(self, questions, contexts, answers):
        """(x, y) of the windows of answered questions, the answer's start and end piece a window."""
        if answers is None:
            raise TypeError('answers must be a list of one answer a question ("" or None for none), got None.')
        features = make_windows(self._examples(questions, contexts, answers), self.tokenizer, **self.windows)
        return features.inputs, {"start_logits": features.start_positions, "end_logits": features.end_positions}

    def predict(self, questions: Sequence[str], contexts: Sequence[str], n_best_size: int = 20) -> list:
        """One {"answer", "score", "start_char"} a question ("" and the null score where it has
        none, with `allow_no_answer`)."""
        examples = self._examples(questions, contexts)
        if not examples:
            return []
        features = make_windows(examples, self.tokenizer, **self.windows)
        outputs = predict_by_length(self.model, features.inputs, verbose=0)
        texts, nbest = decode_answers(
            examples,
            features,
            outputs["start_logits"],
            outputs["end_logits"],
            n_best_size=n_best_size,
            max_answer_length=self.max_answer_length,
            version_2=self.allow_no_answer,
        )
        answers = []
        for example in examples:
            best: Optional[dict] = next((c for c in nbest[example.qid] if c["text"] == texts[example.qid]), None)
            answers.append(
                {
                    "answer": texts[example.qid],
                    "score": best["score"] if best else None,
                    "start_char": best["start_char"] if best else -1,
                }
            )
        return answers

    def save(self, path: str) -> None:
        """The model, its vocabulary, windows and answer settings, to a `.keras` file (atomically)."""
        settings = {
            **self.windows,
            "max_answer_length": self.max_answer_length,
            "allow_no_answer": self.allow_no_answer,
        }
        save_model(self.model, path, settings=settings)

    def export(self, base_dir: str, name: str, **settings) -> dict:
        """`bertlayers.export.export_for_serving`: NAME (ids in) and NAME_text (question and context
        in, the answer decoded in the graph)."""
        settings.setdefault("sequence_length", self.windows["sequence_length"])
        settings.setdefault("max_query_length", self.windows["max_query_length"])
        settings.setdefault("max_answer_length", self.max_answer_length)
        return export_for_serving(self.model, name, base_dir=base_dir, **settings)


__all__ = ["TextAnswerer"]
