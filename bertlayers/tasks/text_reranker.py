"""`TextReranker`: a cross-encoder that scores (query, passage) pairs, as sentence-transformers'
`CrossEncoder` does: the pair read together by one encoder, one logit, the score its activation.

    reranker = TextReranker.from_checkpoint("cross-encoder/ms-marco-MiniLM-L6-v2")
    reranker.predict([("how do I reset it?", "Hold the button for ten seconds.")])   # [1] scores
    reranker.rank("how do I reset it?", passages, top_k=3)   # [{"corpus_id", "score"}], best first
    reranker.fit(pairs, labels)                              # labels in [0, 1] (sigmoid) or any (identity)
    reranker.export("savedmodels", "reranker")               # (text_a, text_b) in, score out

It reads a sentence-transformers `CrossEncoder` folder (its activation from
config_sentence_transformers.json), any one-label `...ForSequenceClassification` folder of a
family the library loads (sigmoid, sentence-transformers' default for one label), and a causal-LM
folder of a family with an LLM reranker's prompt (Qwen3-Reranker: the pair prompted under an
instruction, its score the probability of "yes" against "no" as the next token).

    reranker = TextReranker.from_checkpoint("Qwen/Qwen3-Reranker-0.6B", instruction="Find the answer")
"""

import dataclasses
from collections.abc import Sequence

import keras
import numpy as np

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.loading import load_checkpoint, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.convert.sentence_transformers import cross_encoder_settings
from bertlayers.export.saved_model import export_for_serving
from bertlayers.models.answer_token_scorer import AnswerTokenScorer
from bertlayers.models.pretrainer import CausalLMPretrainer
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.networks.input_limits import input_limits
from bertlayers.tasks.inputs import examples_given, recorded_tokenizer_of, text_list
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks
from bertlayers.tokenizers.pair_prompt import RERANKER_PROMPTS, PairPrompt
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.task_fitting import compile_task_model, fit_settings, fit_task_model, optimizer_steps

ACTIVATIONS = {
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "identity": lambda x: x,
    "tanh": np.tanh,
}


def _pairs(pairs):
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
        raise TypeError(f"pairs must be a list of (query, passage) pairs, got {type(pairs).__name__}.")
    bad = [i for i, pair in enumerate(pairs) if not (isinstance(pair, (tuple, list)) and len(pair) == 2)]
    if bad:
        raise ValueError(f"pairs must each be (query, passage); pair {bad[0]} is {pairs[bad[0]]!r}.")
    return text_list([p[0] for p in pairs], "queries"), text_list([p[1] for p in pairs], "passages")


class TextReranker:
    """Score text pairs with a cross-encoder or an LLM reranker.

    Args:
      model: a `SequenceClassifier` with one output (its logit), or an `AnswerTokenScorer` (an
        LLM reranker: its logit is the positive answer's less the negative's, its score that
        logit's sigmoid, the positive's probability); the tokenizer it reads recorded on it
        (`from_checkpoint` and `load` see to it).
      sequence_length: pieces per pair; longer pairs are truncated (a prompt's prefix and
        suffix kept whole, the prompted pair cut from its end).
      activation: what a score is of the logit: "sigmoid", "identity" or "tanh" (an LLM
        reranker's: "sigmoid").
      prompt: a `PairPrompt` each pair is read in (an LLM reranker's), else none: the pair packed
        as the tokenizer packs two texts.
    """

    def __init__(
        self,
        model: SequenceClassifier | AnswerTokenScorer,
        sequence_length: int = 512,
        activation: str = "sigmoid",
        prompt: PairPrompt | None = None,
    ) -> None:
        answers = isinstance(model, AnswerTokenScorer)
        if not answers and (not isinstance(model, SequenceClassifier) or model.num_classes != 1):
            found = getattr(model, "num_classes", None)
            raise ValueError(
                f"TextReranker takes a SequenceClassifier with one output (a relevance logit) or an "
                f"AnswerTokenScorer; got a {type(model).__name__}" + (f" with {found} outputs." if found else ".")
            )
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}.")
        if answers and activation != "sigmoid":
            raise ValueError(
                f"An AnswerTokenScorer's score is the sigmoid of its logit (two answers' softmax); got activation "
                f"{activation!r}."
            )
        tokenizer = recorded_tokenizer_of(model, "reranker").in_graph()
        if prompt is not None:
            tokenizer = dataclasses.replace(tokenizer, layout=prompt.layout(tokenizer))
        self.model = model
        self.activation = activation
        self.prompt = prompt
        self.sequence_length = input_limits(model).check_sequence_length(sequence_length)
        if prompt is not None and len(tokenizer.layout.start) + len(tokenizer.layout.end) >= self.sequence_length:
            raise ValueError(
                f"sequence_length {self.sequence_length} leaves no room for a pair: the prompt's prefix and suffix "
                f"take {len(tokenizer.layout.start) + len(tokenizer.layout.end)} pieces."
            )
        self.packer = tokenizer.packer(self.sequence_length)

    @classmethod
    def from_checkpoint(
        cls,
        source: str,
        sequence_length: int | None = None,
        instruction: str | None = None,
        answers: tuple[str, str] | None = None,
    ) -> "TextReranker":
        """The reranker of a cross-encoder folder or Hub name: a sentence-transformers `CrossEncoder`
        folder, a one-label `...ForSequenceClassification` folder, or a causal-LM folder of a family
        with an LLM reranker's prompt (Qwen3-Reranker's); its tokenizer, activation and (unless
        `sequence_length` is given) its maximum length, capped by the encoder's positions (512 at
        most). An LLM reranker takes `instruction` (else its prompt's default) and `answers`, the
        (positive, negative) pieces of its vocabulary its score compares (else its family's: "yes",
        "no")."""
        source = local_or_hub(source)
        settings = cross_encoder_settings(source)  # a folder of another kind refused before the weights load
        checkpoint = load_checkpoint(source)
        model = checkpoint.model
        vocabulary = recorded_tokenizer(checkpoint.encoder)
        reranker = RERANKER_PROMPTS.get(vocabulary.model_type)
        if isinstance(model, CausalLMPretrainer) and reranker is not None:
            positive, negative = (_piece_id(vocabulary, piece, source) for piece in (answers or reranker.answers))
            limit = input_limits(model).max_sequence_length
            return cls(
                record_tokenizer(AnswerTokenScorer(model, positive, negative), vocabulary),
                sequence_length or min(limit or 512, 512),
                "sigmoid",
                reranker.prompt.with_instruction(instruction),
            )
        if instruction is not None or answers is not None:
            raise ValueError(
                f"{source} holds a {type(model).__name__}: instruction and answers are an LLM reranker's (a causal-LM "
                f"folder of {', '.join(sorted(RERANKER_PROMPTS)) or 'a family with a reranker prompt'})."
            )
        if not isinstance(model, SequenceClassifier) or model.num_classes != 1:
            found = f"a {type(model).__name__}" + (
                f" with {model.num_classes} labels" if isinstance(model, SequenceClassifier) else ""
            )
            raise ValueError(
                f"{source} holds {found}, not a reranker: a cross-encoder scores a pair with one logit "
                "(a ...ForSequenceClassification with num_labels 1)."
            )
        if sequence_length is None:
            limit = input_limits(model).max_sequence_length
            sequence_length = min(settings["max_seq_length"] or 512, limit or 512)
        return cls(model, sequence_length, settings["activation"])

    @classmethod
    def load(cls, path: str, sequence_length: int | None = None) -> "TextReranker":
        """A reranker saved with `save`."""
        settings = saved_settings(path)
        prompt = settings.get("prompt")
        return cls(
            load_model_file(path),
            sequence_length or settings.get("sequence_length", 512),
            settings.get("activation", "sigmoid"),
            PairPrompt(**prompt) if prompt else None,
        )

    def inputs(self, pairs: Sequence[tuple[str, str]]) -> dict:
        """The model's inputs for (query, passage) `pairs`: int32 arrays `[n, sequence_length]`."""
        queries, passages = _pairs(pairs)
        if self.prompt is not None:
            return pack_in_chunks(self.packer, self.prompt.texts(queries, passages))
        return pack_in_chunks(self.packer, queries, passages)

    def logits(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        """float32 `[n]`: each pair's relevance logit (an LLM reranker's: the positive answer's
        logit less the negative's)."""
        if not _pairs(pairs)[0]:
            return np.zeros((0,), "float32")
        outputs = predict_by_length(self.model, self.inputs(pairs), batch_size=batch_size, verbose=0)
        logits = np.asarray(outputs["logits"], "float32")
        return logits[:, 1] - logits[:, 0] if isinstance(self.model, AnswerTokenScorer) else logits[:, 0]

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        """float32 `[n]`: each pair's score (its logit through the activation), as
        sentence-transformers' `CrossEncoder.predict` gives it."""
        return ACTIVATIONS[self.activation](self.logits(pairs, batch_size)).astype("float32")

    def rank(self, query: str, documents: Sequence[str], top_k: int | None = None, batch_size: int = 32) -> list[dict]:
        """`documents` by their score against `query`, best first: [{"corpus_id", "score"}] (the
        best `top_k` where given), as `CrossEncoder.rank`."""
        documents = text_list(documents, "documents")
        scores = self.predict([(query, document) for document in documents], batch_size)
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [{"corpus_id": int(i), "score": float(scores[i])} for i in order]

    def fit(
        self,
        pairs: Sequence[tuple[str, str]],
        labels: Sequence[float],
        validation: tuple | None = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        **settings,
    ) -> keras.callbacks.History:
        """Fine-tune on (query, passage) `pairs` and their relevance `labels`, as the fine-tuning
        runners do (`bertlayers.training.task_fitting`): binary cross-entropy on the logit for a
        sigmoid reranker (labels in [0, 1]: sentence-transformers' `BinaryCrossEntropyLoss`),
        mean squared error on the score otherwise.

        Args:
          validation: (pairs, labels), validated after every epoch (see `TextClassifier.fit`).
          callbacks: Keras callbacks for `fit`.
          settings: `FitSettings` fields: epochs (1), batch_size (16), learning_rate (2e-5), ...
        """
        settings = fit_settings(settings, epochs=1, batch_size=16, learning_rate=2e-5)
        train = (self.inputs(examples_given(list(pairs), "pairs")), {"logits": self._labels(labels, len(pairs))})
        if validation is not None:
            held_pairs, held_labels = validation
            validation = (self.inputs(held_pairs), {"logits": self._labels(held_labels, len(held_pairs))})
        if isinstance(self.model, AnswerTokenScorer):
            # The two answers' softmax against (1 - label, label): the binary cross-entropy of its sigmoid.
            loss = keras.losses.CategoricalCrossentropy(from_logits=True)
        elif self.activation == "sigmoid":
            loss = keras.losses.BinaryCrossentropy(from_logits=True)
        else:
            loss = keras.losses.MeanSquaredError()
        compile_task_model(self.model, optimizer_steps(len(train[1]["logits"]), settings), settings, loss=loss)
        return fit_task_model(self.model, train, settings, validation, callbacks)

    def save(self, path: str) -> None:
        """The model, its tokenizer, sequence length and activation, to a `.keras` file (atomically)."""
        settings = {"sequence_length": self.sequence_length, "activation": self.activation}
        if self.prompt is not None:
            settings["prompt"] = dataclasses.asdict(self.prompt)
        save_model(self.model, path, settings=settings)

    def export(self, base_dir: str, name: str, **settings) -> dict:
        """`bertlayers.export.export_for_serving`: NAME (ids in) and NAME_text (its `text_pair`
        signature: `text_a` the query, `text_b` the passage; an LLM reranker's prompt applied in
        the graph, `serving_default` the same), each serving `score` (the activation of the
        logit, as `predict`) and `logit`."""
        from bertlayers.export.serving_outputs import AnswerScoreOutputs, ClassifierOutputs

        settings.setdefault("sequence_length", self.sequence_length)
        if isinstance(self.model, AnswerTokenScorer):
            outputs = AnswerScoreOutputs(self.prompt)
        else:
            outputs = ClassifierOutputs(score_activation=self.activation)
        return export_for_serving(self.model, name, base_dir=base_dir, outputs=outputs, **settings)

    def _labels(self, labels, count):
        values = np.asarray(labels, "float32").reshape(-1)
        if len(values) != count:
            raise ValueError(f"{len(values)} labels for {count} pairs.")
        if self.activation == "sigmoid" and (values.min() < 0 or values.max() > 1):
            raise ValueError(
                f"A sigmoid reranker's labels are relevances in [0, 1]; got values from {values.min()} to {values.max()}."
            )
        if self.activation == "tanh":
            raise ValueError("Fine-tuning a tanh reranker is not supported: its loss is not defined here.")
        if isinstance(self.model, AnswerTokenScorer):  # (negative, positive) as its logits
            return np.stack([1 - values, values], axis=1)
        return values[:, None]


def _piece_id(vocabulary, piece, source):
    """The id of piece `piece` of a `ModelTokenizer`'s tokenizer.json (an answer token)."""
    import json

    files = dict(vocabulary.files)
    spec = json.loads(files["tokenizer.json"]) if "tokenizer.json" in files else {}
    vocabulary = spec.get("model", {}).get("vocab", {})
    index = vocabulary.get(piece) if isinstance(vocabulary, dict) else None
    if index is None:
        raise ValueError(f"{source}: the tokenizer has no piece {piece!r} (an answer the reranker's score compares).")
    return int(index)
