"""`TextSparseEncoder`: SPLADE with strings in, as sentence-transformers' `SparseEncoder` gives it:
one weight per vocabulary entry a text, most of them zero.

    encoder = TextSparseEncoder.from_checkpoint("naver/splade-v3")
    queries = encoder.encode(["how do I reset it?"], prompt_name="query")      # [1, vocabulary]
    documents = encoder.encode(passages, prompt_name="document", max_active_dims=256)
    encoder.similarity(queries, documents)                                       # dot products
    encoder.decode(queries[0], top_k=5)                                          # [(piece, weight)]
    encoder.fit(queries, documents, epochs=1)            # SPLADE's loss: in-batch negatives + FLOPS
    encoder.export("savedmodels", "splade", top_k=128)   # text in, indices and values out

It reads a sentence-transformers `SparseEncoder` folder (`MLMTransformer` or a fill-mask
`Transformer`, then `SpladePooling`) and any `...ForMaskedLM` folder of a family the library loads
(SPLADE's max pooling of log(1 + ReLU)).
"""

import os
from collections.abc import Sequence

import keras
import numpy as np

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.loading import load_checkpoint, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.convert.sentence_transformers import read_sparse_encoder
from bertlayers.export.saved_model import EndpointPart, export_for_serving
from bertlayers.models.encoder_model import DOCUMENT, QUERY
from bertlayers.models.sparse_encoder import SparseDualEncoder, SparseEncoder
from bertlayers.networks.input_limits import input_limits
from bertlayers.tasks.inputs import checked_prompts, chosen_prompt, in_batch_pairs, recorded_tokenizer_of, text_list
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.task_fitting import compile_task_model, fit_task_model, optimizer_steps


def keep_largest(weights: np.ndarray, count: int) -> np.ndarray:
    """`weights` `[n, V]` with all but each row's `count` largest entries set to 0
    (sentence-transformers' `max_active_dims`)."""
    weights = np.array(weights, "float32")
    if count < weights.shape[1]:
        smaller = np.argpartition(-weights, count, axis=1)[:, count:]
        np.put_along_axis(weights, smaller, 0.0, axis=1)
    return weights


class TextSparseEncoder:
    """Encode texts as SPLADE sparse vectors.

    Args:
      model: a `SparseEncoder`, the tokenizer it reads recorded on it (`from_checkpoint` and
        `load` see to it).
      sequence_length: pieces per text; longer texts are truncated.
      prompts: {name: prompt}, prepended to a text when named at `encode`.
      default_prompt_name: the prompt used where `encode` names none (None: none).
    """

    def __init__(
        self,
        model: SparseEncoder,
        sequence_length: int = 256,
        prompts: dict | None = None,
        default_prompt_name: str | None = None,
    ) -> None:
        if not isinstance(model, SparseEncoder):
            raise ValueError(f"TextSparseEncoder takes a SparseEncoder, got a {type(model).__name__}.")
        tokenizer = recorded_tokenizer_of(model, "sparse encoder")
        prompts = checked_prompts(prompts, default_prompt_name)
        self.model = model
        self.tokenizer = tokenizer
        self.sequence_length = input_limits(model).check_sequence_length(sequence_length)
        self.packer = tokenizer.packer(self.sequence_length)
        self.prompts, self.default_prompt_name = prompts, default_prompt_name

    @classmethod
    def from_checkpoint(cls, source: str, sequence_length: int | None = None) -> "TextSparseEncoder":
        """The sparse encoder of a sentence-transformers `SparseEncoder` folder or a `...ForMaskedLM`
        folder (or either's Hub name), its masked-LM head's weights and its tokenizer loaded."""
        source = local_or_hub(source)
        if os.path.isfile(os.path.join(source, "modules.json")):
            spec = read_sparse_encoder(source)
            transformer, pooling, activation = spec.transformer, spec.pooling, spec.activation
            prompts, default, length = spec.prompts, spec.default_prompt_name, spec.max_seq_length
        else:
            transformer, pooling, activation, prompts, default, length = source, "max", "relu", {}, None, None
        checkpoint = load_checkpoint(transformer)
        head = getattr(checkpoint.model, "lm_head", None)
        if head is None:
            raise ValueError(
                f"{transformer} holds a {type(checkpoint.model).__name__}, which has no masked-LM head: SPLADE "
                "reads a ...ForMaskedLM checkpoint's logits at every token."
            )
        model = SparseEncoder(checkpoint.encoder, pooling=pooling, activation=activation)
        theirs = head.get_weights()
        if [w.shape for w in theirs] != [w.shape for w in model.lm_head.get_weights()]:
            raise ValueError(
                f"{transformer}: its masked-LM head ({type(head).__name__}) is not the one the library builds for "
                f"a {type(checkpoint.encoder).__name__}; its weights do not fit."
            )
        model.lm_head.set_weights(theirs)
        record_tokenizer(model, recorded_tokenizer(checkpoint.encoder))
        limit = input_limits(model).max_sequence_length
        return cls(model, min(length or 256, limit), prompts, default)

    @classmethod
    def load(cls, path: str, sequence_length: int | None = None) -> "TextSparseEncoder":
        """A sparse encoder saved with `save`."""
        settings = saved_settings(path)
        return cls(
            load_model_file(path),
            sequence_length or settings.get("sequence_length", 256),
            settings.get("prompts"),
            settings.get("default_prompt_name"),
        )

    @property
    def vocabulary_size(self) -> int:
        return int(self.model.output["sparse_embedding"].shape[-1])

    def encode(
        self,
        texts: Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        max_active_dims: int | None = None,
        batch_size: int = 32,
    ) -> np.ndarray:
        """float32 `[n, vocabulary]` sparse vectors of `texts` (as dense arrays), each after its
        prompt: `prompt`, or the one named `prompt_name` ("query", "document"), else the default;
        `max_active_dims` keeps each text's largest that many entries."""
        texts = text_list(texts, "texts")
        prompt = chosen_prompt(self.prompts, self.default_prompt_name, prompt_name, prompt)
        if max_active_dims is not None and int(max_active_dims) < 1:
            raise ValueError(f"max_active_dims must be positive, got {max_active_dims}.")
        if not texts:
            return np.zeros((0, self.vocabulary_size), "float32")
        outputs = predict_by_length(self.model, self.inputs(texts, prompt), batch_size=batch_size, verbose=0)
        weights = np.asarray(outputs["sparse_embedding"], "float32")
        return weights if max_active_dims is None else keep_largest(weights, int(max_active_dims))

    def inputs(self, texts: Sequence[str], prompt: str = "") -> dict:
        """The model's inputs for `texts` after `prompt`: int32 arrays `[n, sequence_length]`."""
        return pack_in_chunks(self.packer, [prompt + text for text in text_list(texts, "texts")])

    def fit(
        self,
        queries: Sequence[str],
        documents: Sequence[str],
        query_weight: float = 5e-5,
        document_weight: float = 3e-5,
        callbacks: Sequence = (),
        **settings,
    ) -> "keras.callbacks.History":
        """Train on (query, document) pairs as SPLADE does (`SparseDualEncoder`): each query's own
        document ranked first among the batch's by their dot product, and the FLOPS regularizer
        of the queries' and the documents' vectors weighted by `query_weight` and
        `document_weight` (sentence-transformers' `SpladeLoss` over
        `SparseMultipleNegativesRankingLoss`); the prompts "query" and "document" prepended where
        the encoder has them. `settings`: `FitSettings` fields (epochs 1, batch_size 16,
        learning_rate 2e-5, ...)."""
        queries, documents, settings = in_batch_pairs(queries, documents, settings)
        dual = SparseDualEncoder(
            self.model.encoder,
            pooling=self.model.pooling,
            activation=self.model.activation,
            query_weight=query_weight,
            document_weight=document_weight,
        )
        dual.sparse_encoder.lm_head.set_weights(self.model.lm_head.get_weights())
        x = {}
        for prefix, texts, name in ((QUERY, queries, "query"), (DOCUMENT, documents, "document")):
            x.update({prefix + k: v for k, v in self.inputs(texts, self.prompts.get(name, "")).items()})
        compile_task_model(dual, optimizer_steps(len(queries), settings), settings)
        history = fit_task_model(dual, (x, None, None), settings, callbacks=callbacks)
        # The encoder is the same object in both; the head was trained in the dual encoder's copy.
        self.model.lm_head.set_weights(dual.sparse_encoder.lm_head.get_weights())
        return history

    def similarity(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """`[n, m]` dot products of every row of `first` with every row of `second`."""
        return np.asarray(first, "float32") @ np.asarray(second, "float32").T

    def decode(self, weights: np.ndarray, top_k: int | None = None) -> list:
        """One text's vector as [(piece, weight)], largest first (its nonzero entries; the
        `top_k` largest where given)."""
        weights = np.asarray(weights, "float32").reshape(-1)
        order = [i for i in np.argsort(-weights, kind="stable") if weights[i] > 0][:top_k]
        pieces = self.tokenizer.pieces
        return [(pieces[i], float(weights[i])) for i in order]

    def save(self, path: str) -> None:
        """The model, its tokenizer, sequence length and prompts, to a `.keras` file (atomically)."""
        settings = {
            "sequence_length": self.sequence_length,
            "prompts": self.prompts,
            "default_prompt_name": self.default_prompt_name,
        }
        save_model(self.model, path, settings=settings)

    def endpoint_parts(self, name: str = "sparse", top_k: int = 128) -> dict[str, EndpointPart]:
        """This encoder as a part of `bertlayers.export.export_endpoint`: {`name`: its model serving a
        text's `top_k` largest entries, at its sequence length}."""
        from bertlayers.export.serving_outputs import SparseOutputs

        return {name: EndpointPart(self.model, SparseOutputs(top_k), self.sequence_length)}

    def export(self, base_dir: str, name: str, top_k: int = 128, **settings) -> dict:
        """`bertlayers.export.export_for_serving`: NAME (ids in) and NAME_text (text in), each
        serving a text's `top_k` largest entries as `indices` and `values`; a prompt is the
        client's to prepend."""
        (part,) = self.endpoint_parts(top_k=top_k).values()
        settings.setdefault("sequence_length", part.sequence_length)
        return export_for_serving(part.model, name, base_dir=base_dir, outputs=part.outputs, **settings)
