"""`TextMultiVectorEncoder`: late interaction (ColBERT) with strings in, as sentence-transformers'
`MultiVectorEncoder` gives it: a small vector for every scored token of a text, queries scored
against documents by MaxSim.

    encoder = TextMultiVectorEncoder.from_checkpoint("lightonai/GTE-ModernColBERT-v1")
    queries = encoder.encode_query(["how do I reset it?"])         # [[tokens, 128]]: one array a text
    documents = encoder.encode_document(passages)                   # punctuation skipped
    encoder.similarity(queries, documents)                          # MaxSim, [1, len(passages)]
    encoder.fit(train_queries, train_passages, epochs=1)           # in-batch negatives on MaxSim
    encoder.export("savedmodels", "colbert")   # colbert (documents) and colbert_query, text in

It reads a sentence-transformers 6 `MultiVectorEncoder` folder (`Transformer`, a token-level
`Dense`, `MultiVectorMask`, `Normalize`): its prompts (ColBERT's [Q] / [D] markers), query and
document lengths, query expansion with [MASK] tokens, skiplist and similarity function.
"""

import logging
import os
from collections.abc import Sequence

import keras
import numpy as np

from bertlayers.convert.checkpoint_tensors import read_safetensors
from bertlayers.convert.loading import load_encoder, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.convert.sentence_transformers import read_multi_vector_encoder
from bertlayers.export.saved_model import EndpointPart, export_for_serving
from bertlayers.layers.late_interaction import maxsim
from bertlayers.models.encoder_model import DOCUMENT, QUERY
from bertlayers.models.multi_vector_encoder import MultiVectorDualEncoder, MultiVectorEncoder
from bertlayers.networks.input_limits import input_limits
from bertlayers.tasks.inputs import checked_prompts, chosen_prompt, in_batch_pairs, recorded_tokenizer_of, text_list
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.task_fitting import compile_task_model, fit_task_model, optimizer_steps
from bertlayers.utils.text_files import read_json_object

logger = logging.getLogger(__name__)

TASKS = ("query", "document")
SIMILARITIES = ("maxsim", "meanmaxsim")


class TextMultiVectorEncoder:
    """Encode queries and documents as token vectors and score them by MaxSim.

    Args:
      model: the documents' `MultiVectorEncoder`, the tokenizer it reads recorded on it
        (`from_checkpoint` and `load` see to it).
      query_length, document_length: pieces per query and per document (longer texts are cut);
        with `query_expansion`, every query is `query_length` pieces.
      query_expansion: {"token_id", "attend"}: queries padded to `query_length` with `token_id`
        ([MASK]), every position scored (`QueryExpansion`); None: none.
      query_skiplist_ids: token ids never scored in queries (the documents' are the model's).
      prompts: {name: prompt}; "query" and "document" are prepended to those texts unless a call
        names another (ColBERT's "[Q] " and "[D] " markers).
      default_prompt_name: the prompt used where neither applies (None: none).
      similarity: "maxsim" or "meanmaxsim" (MaxSim divided by the query's scored tokens).
    """

    def __init__(
        self,
        model: MultiVectorEncoder,
        query_length: int = 32,
        document_length: int = 180,
        query_expansion: dict | None = None,
        query_skiplist_ids: Sequence[int] = (),
        prompts: dict | None = None,
        default_prompt_name: str | None = None,
        similarity: str = "maxsim",
    ) -> None:
        if not isinstance(model, MultiVectorEncoder) or model.expansion is not None:
            raise ValueError(
                f"TextMultiVectorEncoder takes the documents' MultiVectorEncoder (no query expansion), got "
                f"{type(model).__name__}."
            )
        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity must be one of {SIMILARITIES}, got {similarity!r}.")
        self.tokenizer = recorded_tokenizer_of(model, "multi-vector encoder")
        limits = input_limits(model)
        self.query_length = limits.check_sequence_length(query_length)
        self.document_length = limits.check_sequence_length(document_length)
        expansion = None
        if query_expansion is not None:
            expansion = {
                "token_id": int(query_expansion["token_id"]),
                "length": self.query_length,
                "attend": bool(query_expansion.get("attend", False)),
            }
        self.model = model
        self.query_model = model.for_queries(expansion, query_skiplist_ids)
        record_tokenizer(self.query_model, self.tokenizer)  # its exports tokenize as the documents'
        self.prompts, self.default_prompt_name = checked_prompts(prompts, default_prompt_name), default_prompt_name
        self.similarity_function = similarity
        self.packers = {"query": self.tokenizer.packer(self.query_length)}
        self.packers["document"] = self.tokenizer.packer(self.document_length)

    @classmethod
    def from_checkpoint(cls, source: str) -> "TextMultiVectorEncoder":
        """The multi-vector encoder of a sentence-transformers `MultiVectorEncoder` folder (or its Hub
        name): its encoder, token-level projection and tokenizer loaded, its settings read."""
        spec = read_multi_vector_encoder(source)
        if spec.markers:  # a PyLate checkpoint's: its tokenizer splits them out first
            tokenizer = _with_markers(ModelTokenizer.from_folder(spec.transformer), spec.markers)
            encoder = load_encoder(spec.transformer, tokenizer=tokenizer)
        else:
            encoder = load_encoder(spec.transformer)
        tokenizer = recorded_tokenizer(encoder)
        layer, weights_path = spec.dense
        pieces = {piece: index for index, piece in enumerate(tokenizer.pieces)}
        skiplist = {}
        for task in TASKS:
            ids = (
                [pieces[word] for word in spec.skiplist_words if word in pieces] if task in spec.skiplist_tasks else []
            )
            skiplist[task] = ids
        left_out = [word for word in spec.skiplist_words if word not in pieces]
        if left_out and spec.skiplist_tasks:
            # sentence-transformers drops them too: a word of several pieces would skip its pieces' ids
            logger.info(
                "%s: skiplist words that are no single piece of the tokenizer, not skipped: %s", source, left_out
            )
        model = MultiVectorEncoder(
            encoder,
            layer["units"],
            activation=layer["activation"],
            use_bias=layer["use_bias"],
            normalize=spec.normalize,
            skiplist_ids=skiplist["document"],
        )
        tensors = read_safetensors(weights_path)
        kernel = np.asarray(tensors["linear.weight"]).T  # torch Linear [out, in] -> Keras [in, out]
        if tuple(kernel.shape) != tuple(model.projection.kernel.shape):
            raise ValueError(
                f"{weights_path}: linear.weight is {tuple(kernel.shape[::-1])} but the encoder gives "
                f"{model.projection.kernel.shape[0]} inputs to {layer['units']} outputs."
            )
        model.projection.set_weights([kernel, np.asarray(tensors["linear.bias"])] if layer["use_bias"] else [kernel])
        record_tokenizer(model, tokenizer)
        expansion = None
        limit = input_limits(model).max_sequence_length
        query_length = min(spec.query_length or spec.max_seq_length or limit, limit)
        if spec.query_expansion is not None:
            token = spec.query_expansion["token"] or _mask_token(spec.transformer)
            if token not in pieces:
                raise ValueError(f"{source}: the query expansion token {token!r} is not a piece of its tokenizer.")
            expansion = {"token_id": pieces[token], "attend": spec.query_expansion["attend"]}
            query_length = spec.query_expansion["length"]
        return cls(
            model,
            query_length=query_length,
            document_length=min(spec.document_length or spec.max_seq_length or limit, limit),
            query_expansion=expansion,
            query_skiplist_ids=skiplist["query"],
            prompts=spec.prompts,
            default_prompt_name=spec.default_prompt_name,
            similarity=spec.similarity,
        )

    @classmethod
    def load(cls, path: str) -> "TextMultiVectorEncoder":
        """A multi-vector encoder saved with `save`."""
        settings = saved_settings(path)
        return cls(load_model_file(path), **settings)

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def encode(
        self,
        texts: Sequence[str],
        task: str = "document",
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
    ) -> list:
        """Each text's scored tokens' vectors, float32 `[tokens, dimension]` a text, as a query or
        a document (`task`), after its prompt: `prompt`, or the one named `prompt_name`, else the
        one named as the task, else the default."""
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}.")
        texts = text_list(texts, "texts")
        if prompt is None and prompt_name is None and task in self.prompts:
            prompt_name = task
        prompt = chosen_prompt(self.prompts, self.default_prompt_name, prompt_name, prompt)
        if not texts:
            return []
        inputs = self.inputs(texts, task, prompt)
        if task == "query" and self.query_model.expansion is not None:  # every position counts: no cut
            outputs = self.query_model.predict(inputs, batch_size=batch_size, verbose=0)
        else:
            model = self.query_model if task == "query" else self.model
            outputs = predict_by_length(model, inputs, batch_size=batch_size, verbose=0)
        vectors, masks = np.asarray(outputs["token_embeddings"], "float32"), np.asarray(outputs["token_mask"])
        return [rows[mask != 0] for rows, mask in zip(vectors, masks)]

    def encode_query(self, texts: Sequence[str], **settings) -> list:
        """`encode(texts, task="query")`."""
        return self.encode(texts, task="query", **settings)

    def encode_document(self, texts: Sequence[str], **settings) -> list:
        """`encode(texts, task="document")`."""
        return self.encode(texts, task="document", **settings)

    def inputs(self, texts: Sequence[str], task: str = "document", prompt: str = "") -> dict:
        """The model's inputs for `texts` after `prompt`: int32 arrays `[n, length]` of the task's length."""
        return pack_in_chunks(self.packers[task], [prompt + text for text in text_list(texts, "texts")])

    def fit(
        self, queries: Sequence[str], documents: Sequence[str], scale: float = 1.0, callbacks: Sequence = (), **settings
    ) -> "keras.callbacks.History":
        """Train on (query, document) pairs as ColBERT does (`MultiVectorDualEncoder`): each query's
        own document ranked first among the batch's by `scale` times MaxSim (sentence-transformers'
        `MultiVectorMultipleNegativesRankingLoss`), the queries expanded and each side's skiplist
        and prompt ("query", "document") applied as `encode` does; the encoder and the projection
        train in place. `settings`: `FitSettings` fields (epochs 1, batch_size 16,
        learning_rate 2e-5, ...)."""
        queries, documents, settings = in_batch_pairs(queries, documents, settings)
        model = self.model
        dual = MultiVectorDualEncoder(
            model.encoder,
            model.dimension,
            model.activation,
            model.use_bias,
            model.normalize,
            expansion=self.query_model.expansion,
            query_skiplist_ids=self.query_model.skiplist_ids,
            document_skiplist_ids=model.skiplist_ids,
            scale=scale,
            projection=model.projection,  # shared: the documents' and the queries' models train with it
        )
        x = {}
        for prefix, texts, task in ((QUERY, queries, "query"), (DOCUMENT, documents, "document")):
            x.update({prefix + k: v for k, v in self.inputs(texts, task, self.prompts.get(task, "")).items()})
        compile_task_model(dual, optimizer_steps(len(queries), settings), settings)
        return fit_task_model(dual, (x, None, None), settings, callbacks=callbacks)

    def similarity(self, queries: list, documents: list) -> np.ndarray:
        """`[len(queries), len(documents)]` MaxSim scores (divided by each query's tokens under
        "meanmaxsim") of `encode_query` and `encode_document` results."""
        return maxsim(queries, documents, mean=self.similarity_function == "meanmaxsim")

    def save(self, path: str) -> None:
        """The documents' model, its tokenizer and the queries' settings, to a `.keras` file (atomically)."""
        expansion = self.query_model.expansion
        settings = {
            "query_length": self.query_length,
            "document_length": self.document_length,
            "query_expansion": None if expansion is None else {k: expansion[k] for k in ("token_id", "attend")},
            "query_skiplist_ids": list(self.query_model.skiplist_ids),
            "prompts": self.prompts,
            "default_prompt_name": self.default_prompt_name,
            "similarity": self.similarity_function,
        }
        save_model(self.model, path, settings=settings)

    def endpoint_parts(self, name: str = "multi_vector") -> dict[str, EndpointPart]:
        """This encoder as parts of `bertlayers.export.export_endpoint`: {`name`: the documents'
        model at the documents' length, `name`_query: the queries' at the queries' length}, longer
        texts cut."""
        return {
            name: EndpointPart(self.model, None, self.document_length, truncate=True),
            f"{name}_query": EndpointPart(self.query_model, None, self.query_length, truncate=True),
        }

    def export(self, base_dir: str, name: str, **settings) -> dict:
        """`bertlayers.export.export_for_serving` of the documents' model as NAME and NAME_text and of
        the queries' as NAME_query and NAME_query_text, each serving `token_embeddings` `[n, length,
        dimension]` (zeros at the tokens not scored) and `token_mask` `[n, length]`; the prompts
        ("[Q] ", "[D] ") are the client's to prepend."""
        paths = {}
        for key, part in self.endpoint_parts().items():
            given = {"sequence_length": part.sequence_length, "truncate": part.truncate, **settings}
            paths.update(export_for_serving(part.model, name + key[len("multi_vector") :], base_dir=base_dir, **given))
        return paths


def _mask_token(folder):
    """The mask token a Hugging Face folder's tokenizer_config.json names ("[MASK]" without one)."""
    path = os.path.join(folder, "tokenizer_config.json")
    token = read_json_object(path).get("mask_token") if os.path.isfile(path) else None
    if isinstance(token, dict):  # an AddedToken's fields
        token = token.get("content")
    return token or "[MASK]"


def _with_markers(tokenizer, markers):
    """`tokenizer` splitting out each marker it knows (the marker, or its first word: PyLate saves
    "[Q] " with its space as one added token) as one piece, as sentence-transformers registers
    them; a marker it does not know ("query: ") stays text."""
    pieces = set(tokenizer.pieces)
    known = []
    for marker in markers:
        for candidate in (marker, *marker.split(None, 1)[:1]):
            if candidate in pieces:
                known.append(candidate)
                break
    return tokenizer.with_special_tokens(known) if known else tokenizer
