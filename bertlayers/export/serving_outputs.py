"""What a served model returns: the model's own outputs, or a task's reading of them.

`export_for_serving` calls a model with the id inputs it takes (any subset of `token_ids`,
`segment_ids`, `padding_mask`, named as its inputs are) and hands the outputs to one of these:

    ModelOutputs()           every output under its own name (any model built from the layers)
    EncoderOutputs()         pooled_output [B, H] and sequence_output [B, S, H]
    ClassifierOutputs()      logits, probabilities, label (and label_name); or score, one output
    TaggerOutputs()          logits [B, S, C] and tags [B, S]; the text model adds token_ids
    SpanOutputs()            start_logits, end_logits; the text model takes (question, context)
                             and returns the best answer span as text and character offsets
    MultiTaskOutputs()       every head of a MultiTask model, as above, prefixed by its task
    SparseOutputs(top_k)     a sparse encoder's top_k entries a text: indices and values
    EmbeddingOutputs()       a sentence embedder's embedding; the text model's `embed` signature
                             takes a prompt name and Matryoshka dimensions too (`TextEmbedder.export`)
    AnswerScoreOutputs()     an LLM reranker's score (its positive answer's probability) and
                             logit; with a `PairPrompt`, the text model takes (query, document)
                             and prompts them in the graph (`TextReranker.export`)

The library's models get theirs by default (`default_outputs`); a model a user composed gets
`ModelOutputs` unless given another: a head that returns logits serves as a classifier with
`outputs=ClassifierOutputs(label_names=[...])`.
"""

from bertlayers import backend
from bertlayers.models.answer_token_scorer import AnswerTokenScorer
from bertlayers.models.ensemble import ClassifierEnsemble
from bertlayers.models.multi_task import MultiTask
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.models.span_predictor import SpanPredictor
from bertlayers.models.sparse_encoder import SparseEncoder
from bertlayers.models.token_classifier import TokenClassifier
from bertlayers.networks.encoder_base import EncoderBase
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.pair_prompt import PairPrompt

tf = require_tensorflow(__name__)

ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")
SCORE_ACTIVATIONS = {"identity": tf.identity, "sigmoid": tf.math.sigmoid, "tanh": tf.math.tanh}


def model_input_names(model):
    """The names `model` takes its inputs by (its `keras.Input` names, or its input dict's keys)."""
    # A functional model keeps the structure it was built with (a dict's keys are what `call` takes).
    struct = backend.input_structure(model)
    if isinstance(struct, dict):
        return list(struct)
    inputs = getattr(model, "inputs", None)
    if not inputs:
        raise ValueError(
            f"{type(model).__name__} {model.name!r} has no symbolic inputs to read names from: export a "
            "functional model (keras.Model(inputs, outputs)) whose inputs are keras.Input(name=...)."
        )
    return [tensor.name for tensor in inputs]


def model_output_names(model):
    """The names the served outputs take: the output dict's keys, else the output layers' names."""
    struct = getattr(model, "_outputs_struct", None)
    if isinstance(struct, dict):
        return list(struct)
    return list(model.output_names)


def flat_outputs(outputs):
    """{name: tensor} with every list of tensors (an encoder's per-layer outputs) as `name_0`, `name_1`, ...:
    a signature returns tensors only."""
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update(flat_outputs({f"{name}_{index}": item for index, item in enumerate(value)}))
        else:
            flat[name] = value
    return flat


def symbolic_outputs(model):
    """{output name: the model's symbolic output}, lists flattened (`flat_outputs`)."""
    struct = getattr(model, "_outputs_struct", None)
    if isinstance(struct, dict):
        return flat_outputs(dict(struct))
    return flat_outputs(dict(zip(model.output_names, getattr(model, "outputs", None) or [])))


def call_model(model, inputs):
    """`model` on {name: tensor} (the inputs it takes, by name), as {output name: tensor}."""
    names = model_input_names(model)
    struct = backend.input_structure(model)
    if isinstance(struct, dict):
        outputs = model({name: inputs[name] for name in names}, training=False)
    elif len(names) == 1:
        outputs = model(inputs[names[0]], training=False)
    else:
        outputs = model([inputs[name] for name in names], training=False)
    if isinstance(outputs, dict):
        return dict(outputs)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    return dict(zip(model_output_names(model), outputs))


def check_servable(model, extra_inputs=()):
    """The id inputs `model` takes, in (token_ids, segment_ids, padding_mask) order; a ValueError
    naming what TF Serving could not feed (another input, no token_ids) or return (no batch axis)."""
    names = model_input_names(model)
    unknown = [n for n in names if n not in ID_INPUTS and n not in extra_inputs]
    if unknown or "token_ids" not in names:
        raise ValueError(
            f"{type(model).__name__} {model.name!r} takes inputs {names}: a served model takes token_ids and "
            f"optionally segment_ids and padding_mask, named so (keras.Input(name=...)); "
            + (f"{unknown} cannot be fed." if unknown else "token_ids is missing.")
        )
    scalar = [name for name, tensor in symbolic_outputs(model).items() if len(tensor.shape) == 0]
    if scalar:
        raise ValueError(
            f"Outputs {scalar} of {model.name!r} have no batch axis; a served output is one row per request."
        )
    return [n for n in ID_INPUTS if n in names]


class ModelOutputs:
    """Every output of the model under its own name."""

    text_kind = "text"  # text in: one text (`serving_default`) or a pair (`text_pair`)
    extra_inputs = ()  # inputs besides the ids that the outputs derive themselves
    returns_pieces = False  # the text model adds the `token_ids` its per-token outputs refer to

    def bind(self, model):
        """Settings read from the model being exported; returns self."""
        return self

    def text_tokenizer(self, tokenizer):
        """The in-graph tokenizer the text model packs with (a prompt's layout; this one by default)."""
        return tokenizer

    def __call__(self, model, inputs):
        return flat_outputs(call_model(model, inputs))


class EncoderOutputs(ModelOutputs):
    """An encoder's `pooled_output` [B, H] and `sequence_output` [B, S, H]."""

    def __call__(self, model, inputs):
        sequence = call_model(model, inputs)["sequence_output"]
        # Pooled from the full last layer computed anyway (`pooled_output`'s own [CLS]-only
        # call of the last block would project its keys and values again).
        return {"pooled_output": model.pooler(sequence, inputs["padding_mask"]), "sequence_output": sequence}


class ClassifierOutputs(ModelOutputs):
    """A classifier's `logits` [B, C], `probabilities`, `label` (and `label_name`, given names by
    class id); a single output (C = 1) is a regression `score` [B].

    Args:
      label_names: strings by class id (default: the model's own `label_names`, if any).
      output: the model output holding the logits.
      score_activation: for a single output, what `score` is of the logit: "identity" (the
        logit itself), "sigmoid" or "tanh" (a cross-encoder reranker's; the logit is then served
        beside it as `logit`).
    """

    def __init__(
        self, label_names: list[str] | None = None, output: str = "logits", score_activation: str = "identity"
    ) -> None:
        if score_activation not in SCORE_ACTIVATIONS:
            raise ValueError(
                f"score_activation must be one of {', '.join(SCORE_ACTIVATIONS)}, got {score_activation!r}."
            )
        self.label_names = list(label_names) if label_names is not None else None
        self.output = output
        self.score_activation = score_activation

    def bind(self, model):
        if self.label_names is None:
            self.label_names = getattr(model, "label_names", None)
        if self.label_names is not None:
            classes = symbolic_outputs(model).get(self.output)
            if classes is not None and len(self.label_names) != classes.shape[-1]:
                raise ValueError(f"label_names has {len(self.label_names)} names for {classes.shape[-1]} classes.")
        return self

    def __call__(self, model, inputs):
        outputs = call_model(model, inputs)
        if self.output not in outputs:
            raise ValueError(
                f"ClassifierOutputs reads output {self.output!r}; {model.name!r} returns {sorted(outputs)}."
            )
        return self.read(outputs)

    def read(self, outputs):
        """The served outputs of the model's outputs."""
        logits = outputs[self.output]
        if logits.shape[-1] == 1:
            if self.score_activation == "identity":
                return {"score": logits[:, 0]}
            return {"score": SCORE_ACTIVATIONS[self.score_activation](logits[:, 0]), "logit": logits[:, 0]}
        served = {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.argmax(logits, axis=-1, output_type=tf.int32),
        }
        if self.label_names:
            served["label_name"] = tf.gather(tf.constant(self.label_names), served["label"])
        return served


class EmbeddingOutputs(ModelOutputs):
    """A sentence embedder's `embedding` `[B, D]`; its text model adds the `embed` signature:
    `text` `[B]`, `prompt_name` (a string: one of `prompts`, or "" for none) and `dimensions`
    (an int: the leading dimensions kept, Matryoshka; 0 keeps all), the prompt prepended in the
    graph and, where the model normalizes, the kept part normalized again (as
    `TextEmbedder.encode(truncate_dim=..., normalize=True)` and Text Embeddings Inference's
    `dimensions` give it). A name not among the prompts, or dimensions past D, fails the request
    with a message naming it.

    A model that leaves the prompt out of its pooling (`SentenceEmbedder(include_prompt=False)`)
    is given each row's `prompt_length`: the named prompt's in `embed`, 0 (nothing left out, as
    for a text without a prompt) in the other signatures.

    Args:
      prompts: {name: prompt} the `embed` signature knows.
      normalize: whether a truncated embedding is normalized again (the model's own normalization).
      output: the model output holding the embeddings.
      prompt_lengths: {name: the leading tokens a text after that prompt leaves out of the pooling}
        (`TextEmbedder.prompt_length`), for a model that takes `prompt_length`.
    """

    text_kind = "embedding"
    extra_inputs = ("prompt_length",)

    def __init__(
        self,
        prompts: dict | None = None,
        normalize: bool = True,
        output: str = "embedding",
        prompt_lengths: dict | None = None,
    ) -> None:
        self.prompts = {str(k): str(v) for k, v in (prompts or {}).items()}
        self.normalize = bool(normalize)
        self.output = output
        self.prompt_lengths = {str(k): int(v) for k, v in (prompt_lengths or {}).items()}
        missing = sorted(set(self.prompt_lengths) - set(self.prompts))
        if missing:
            raise ValueError(f"prompt_lengths names {missing}, which are not among the prompts {sorted(self.prompts)}.")

    def __call__(self, model, inputs):
        inputs = dict(inputs)
        given = inputs.pop("prompt_length", None)
        if "prompt_length" in model_input_names(model):
            rows = tf.shape(inputs["token_ids"])[:1]
            inputs["prompt_length"] = tf.zeros(rows, tf.int32) if given is None else tf.broadcast_to(given, rows)
        return {self.output: call_model(model, inputs)[self.output]}

    def prompt_length_of(self, prompt_name):
        """The `prompt_length` a `prompt_name` scalar gives (0 for "" or a prompt without a length;
        a name not among the prompts fails in `prompt_of`)."""
        names = tf.constant([""] + list(self.prompts))
        lengths = tf.constant([0] + [self.prompt_lengths.get(name, 0) for name in self.prompts], tf.int32)
        return tf.reduce_sum(tf.where(tf.equal(names, prompt_name), lengths, 0))

    def prompt_of(self, prompt_name):
        """The prompt a `prompt_name` scalar names ("" for ""), or a failed request naming it."""
        names = tf.constant([""] + list(self.prompts))
        values = tf.constant([""] + list(self.prompts.values()))
        found = tf.equal(names, prompt_name)
        check = tf.debugging.Assert(
            tf.reduce_any(found),
            [f"prompt_name must be one of {[''] + list(self.prompts)}; got", prompt_name],
        )
        with tf.control_dependencies([check]):
            return tf.strings.reduce_join(tf.boolean_mask(values, found))

    def truncated(self, embedding, dimensions):
        """`embedding`'s first `dimensions` (0: all), normalized again where the model normalizes."""
        size = tf.shape(embedding)[-1]
        check = tf.debugging.Assert(
            tf.logical_and(dimensions >= 0, dimensions <= size),
            ["dimensions must be in [0, the embedding's size]; got", dimensions, "for size", size],
        )
        with tf.control_dependencies([check]):
            kept = embedding[:, : tf.where(tf.equal(dimensions, 0), size, dimensions)]
        if self.normalize:
            kept = kept / tf.maximum(tf.norm(kept, axis=-1, keepdims=True), 1e-12)
        return kept


class SparseOutputs(ModelOutputs):
    """A sparse encoder's `top_k` largest entries a text: `indices` int32 `[B, top_k]` (vocabulary
    ids, largest weight first) and `values` float32 `[B, top_k]` (a text with fewer nonzero
    entries ends in zeros: a client keeps the values above 0).

    Args:
      top_k: entries served a text.
      output: the model output holding the `[B, V]` sparse vectors.
    """

    def __init__(self, top_k: int = 128, output: str = "sparse_embedding") -> None:
        if int(top_k) < 1:
            raise ValueError(f"top_k must be positive, got {top_k}.")
        self.top_k = int(top_k)
        self.output = output

    def __call__(self, model, inputs):
        return self.read(call_model(model, inputs))

    def read(self, outputs):
        """The served outputs of the model's outputs."""
        weights = outputs[self.output]
        k = tf.minimum(self.top_k, tf.shape(weights)[-1])
        values, indices = tf.math.top_k(tf.cast(weights, tf.float32), k=k)
        return {"indices": tf.cast(indices, tf.int32), "values": values}


class TaggerOutputs(ModelOutputs):
    """A tagger's `logits` [B, S, C] and `tags` [B, S]: the model's own `tags` output where it has
    one (a CRF's Viterbi path), else each token's best tag; the text model adds the `token_ids` it
    tagged."""

    returns_pieces = True

    def __init__(self, output: str = "logits", decoded: str = "tags") -> None:
        self.output = output
        self.decoded = decoded  # the model's output of decoded tags, where it has one

    def __call__(self, model, inputs):
        return self.read(call_model(model, inputs))

    def read(self, outputs):
        """The served outputs of the model's outputs."""
        logits = outputs[self.output]
        tags = outputs[self.decoded] if self.decoded in outputs else tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"logits": logits, "tags": tf.cast(tags, tf.int32)}


class MultiTaskOutputs(ModelOutputs):
    """Every head of a `MultiTask` model, each under its task's name: a classification task's
    `<task>_logits`, `_probabilities`, `_label` (and `_label_name`), a tagging task's `<task>_logits`
    and `<task>_tags`; the model runs once for them all. It reads the model's `tasks` (a
    `MultiTask`'s, or the ones an ensemble of them carries)."""

    def bind(self, model):
        if not isinstance(getattr(model, "tasks", None), dict):
            raise ValueError(
                f"MultiTaskOutputs serves the heads of a model with tasks (a MultiTask, or an ensemble of them); "
                f"{model.name!r} is a {type(model).__name__}."
            )
        self.readers = {
            task: ClassifierOutputs(spec.label_names, output=task).bind(model)
            if spec.kind == "classification"
            else TaggerOutputs(output=task, decoded=None)
            for task, spec in model.tasks.items()
        }
        self.returns_pieces = any(isinstance(r, TaggerOutputs) for r in self.readers.values())
        return self

    def __call__(self, model, inputs):
        outputs = call_model(model, inputs)
        return {
            f"{task}_{name}": value
            for task, reader in self.readers.items()
            for name, value in reader.read(outputs).items()
        }


class SpanOutputs(ModelOutputs):
    """Answer spans (SQuAD): `start_logits` and `end_logits` [B, S]; the text model takes a
    question and a context and decodes the best span of at most `max_answer_length` pieces.
    A model that takes a `span_mask` input is given the context pieces (and [CLS], the null
    answer): the text model's own packing says where they are; an ids request's second segment
    does."""

    text_kind = "question_context"
    extra_inputs = ("span_mask",)

    def __init__(self, max_answer_length: int = 30, max_query_length: int = 64) -> None:
        self.max_answer_length = max_answer_length
        self.max_query_length = max_query_length

    def __call__(self, model, inputs):
        inputs = dict(inputs)
        given = inputs.pop("span_mask", None)
        if "span_mask" in model_input_names(model) and given is not None:
            inputs["span_mask"] = given
        elif "span_mask" in model_input_names(model):
            segment_ids, padding_mask = inputs["segment_ids"], inputs["padding_mask"]
            # Answers start and end in the second segment (the context), or at [CLS] for "no answer".
            context = tf.logical_and(tf.equal(segment_ids, 1), tf.equal(padding_mask, 1))
            followed_by_context = tf.concat([context[:, 1:], tf.zeros_like(context[:, :1])], axis=1)
            span_mask = tf.logical_and(context, followed_by_context)  # drops the closing [SEP]
            span_mask = tf.concat([tf.ones_like(span_mask[:, :1]), span_mask[:, 1:]], axis=1)
            inputs = {**inputs, "span_mask": tf.cast(span_mask, tf.int32)}
        outputs = call_model(model, inputs)
        return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}


class AnswerScoreOutputs(ModelOutputs):
    """An `AnswerTokenScorer`'s `score` [B] (the positive answer's probability) and `logit` [B]
    (the positive's logit less the negative's: the score is its sigmoid). With `prompt` (a
    `PairPrompt`) the text model's `serving_default` and `text_pair` take `text_a` (the query)
    and `text_b` (the document) and prompt them in the graph, packed in the prompt's layout.
    """

    def __init__(self, prompt: PairPrompt | None = None) -> None:
        self.prompt = prompt
        self.text_kind = "prompted_pair" if prompt is not None else "text"

    def text_tokenizer(self, tokenizer):
        if self.prompt is None:
            return tokenizer
        import dataclasses

        return dataclasses.replace(tokenizer, layout=self.prompt.layout(tokenizer))

    def __call__(self, model, inputs):
        logits = call_model(model, inputs)["logits"]  # [B, 2]: the negative's, the positive's
        logit = logits[:, 1] - logits[:, 0]
        return {"score": tf.math.sigmoid(logit), "logit": logit}


def default_outputs(model, label_names=None, max_answer_length=30, max_query_length=64):
    """The outputs a library model serves by its class; `ModelOutputs` for any other model."""
    if isinstance(model, ClassifierEnsemble):  # it answers as its members do: classifies or tags
        return default_outputs(model.members[0], label_names, max_answer_length, max_query_length)
    if isinstance(model, SequenceClassifier) or (
        label_names is not None and not isinstance(model, (EncoderBase, TokenClassifier, SpanPredictor, MultiTask))
    ):
        return ClassifierOutputs(label_names)
    if label_names is not None:
        raise ValueError(f"label_names needs a classifier's logits; {model.name!r} is a {type(model).__name__}.")
    if isinstance(model, EncoderBase):
        return EncoderOutputs()
    if isinstance(model, TokenClassifier):
        return TaggerOutputs()
    if isinstance(model, SpanPredictor):
        return SpanOutputs(max_answer_length, max_query_length)
    if isinstance(model, MultiTask):
        return MultiTaskOutputs()
    if isinstance(model, SparseEncoder):
        return SparseOutputs()
    if isinstance(model, AnswerTokenScorer):
        return AnswerScoreOutputs()
    return ModelOutputs()
