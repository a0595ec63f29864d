"""`TextEmbedder`: a checkpoint's tokenizer and a `SentenceEmbedder` over its encoder, with strings in
and embeddings out, as sentence-transformers' `SentenceTransformer.encode` gives them.

    embedder = TextEmbedder.from_checkpoint("sentence-transformers/all-MiniLM-L6-v2")
    queries = embedder.encode(["how do I reset it?"], prompt_name="query")   # [1, 384]
    passages = embedder.encode(["Hold the button for ten seconds."])
    embedder.similarity(queries, passages)                 # [1, 1], by the folder's function
    embedder.encode(["..."], truncate_dim=128, normalize=True)   # Matryoshka: the first 128, unit length
    embedder.encode(passages, precision="ubinary")         # 1 bit a dimension (embedding_quantization)
    embedder.export("savedmodels", "embedder")             # text in, embedding out

A sentence-transformers folder is read as its modules say (pooling, Dense layers, Normalize,
prompts, similarity function: `bertlayers.convert.sentence_transformers`); any other checkpoint
embeds as the mean of its real tokens' states, normalized.
"""

import logging
from collections.abc import Sequence

import numpy as np

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.loading import load_encoder, load_model_file
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, saved_settings
from bertlayers.convert.sentence_transformers import (
    load_sentence_embedder,
    read_sentence_transformers,
    save_sentence_transformers,
)
from bertlayers.export.saved_model import EndpointPart, export_for_serving
from bertlayers.models.sentence_embedder import SentenceEmbedder
from bertlayers.networks.input_limits import input_limits
from bertlayers.tasks.embedding_quantization import PRECISIONS, Precision, quantize_embeddings
from bertlayers.tasks.inputs import checked_prompts, chosen_prompt, recorded_tokenizer_of, text_list
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks
from bertlayers.training.length_batching import predict_by_length

logger = logging.getLogger(__name__)

SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")


class TextEmbedder:
    """Embed texts with a sentence-embedding model.

    Args:
      model: a `SentenceEmbedder`, the tokenizer it reads recorded on it (`from_checkpoint` and
        `load` see to it).
      sequence_length: pieces per text; longer texts are truncated.
      prompts: {name: prompt}, prepended to a text when named at `encode`.
      default_prompt_name: the prompt used where `encode` names none (None: none).
      similarity: what `similarity` computes: "cosine", "dot", "euclidean" or "manhattan" (the
        last two negated distances, higher closer, as sentence-transformers gives them).

    Example (the bundled all-MiniLM-L6-v2, a sentence-transformers folder):

    >>> from bertlayers.utils.assets import minilm_path
    >>> embedder = TextEmbedder.from_checkpoint(minilm_path())
    >>> vectors = embedder.encode(["A cat sat on the mat.", "A feline rested on a rug.", "Stock prices fell."])
    >>> vectors.shape, [round(float(score), 2) for score in embedder.similarity(vectors[:1], vectors[1:])[0]]
    ((3, 384), [0.57, 0.09])
    """

    def __init__(
        self,
        model: SentenceEmbedder,
        sequence_length: int = 128,
        prompts: dict | None = None,
        default_prompt_name: str | None = None,
        similarity: str = "cosine",
    ) -> None:
        if not isinstance(model, SentenceEmbedder):
            raise ValueError(f"TextEmbedder takes a SentenceEmbedder, got a {type(model).__name__}.")
        tokenizer = recorded_tokenizer_of(model, "embedder")
        prompts = checked_prompts(prompts, default_prompt_name)
        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity must be one of {', '.join(SIMILARITIES)}, got {similarity!r}.")
        self.model = model
        self.sequence_length = input_limits(model).check_sequence_length(sequence_length)
        self.packer = tokenizer.packer(self.sequence_length)
        self.prompts, self.default_prompt_name, self.similarity_name = prompts, default_prompt_name, similarity

    @classmethod
    def from_checkpoint(cls, source: str, sequence_length: int | None = None) -> "TextEmbedder":
        """The embedder of `source` (a folder or Hub name): a sentence-transformers folder as its
        modules say, at its max_seq_length; any other checkpoint's encoder mean-pooled and
        normalized. `sequence_length` sets another length (128 where the folder says none)."""
        source = local_or_hub(source)
        spec = read_sentence_transformers(source)
        if spec is None:
            encoder = load_encoder(source)
            model = record_tokenizer(SentenceEmbedder(encoder), recorded_tokenizer(encoder))
            return cls(model, sequence_length or 128)
        model, spec = load_sentence_embedder(source)
        record_tokenizer(model, recorded_tokenizer(model.encoder))
        return cls(
            model,
            sequence_length or spec.max_seq_length or 128,
            spec.prompts,
            spec.default_prompt_name,
            spec.similarity,
        )

    @classmethod
    def load(cls, path: str, sequence_length: int | None = None) -> "TextEmbedder":
        """An embedder saved with `save`, with its prompts and similarity function."""
        settings = saved_settings(path)
        return cls(
            load_model_file(path),
            sequence_length or settings.get("sequence_length", 128),
            settings.get("prompts"),
            settings.get("default_prompt_name"),
            settings.get("similarity", "cosine"),
        )

    @property
    def dimension(self) -> int:
        return int(self.model.output["embedding"].shape[-1])

    def encode(
        self,
        texts: Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        truncate_dim: int | None = None,
        normalize: bool = False,
        batch_size: int = 32,
        precision: Precision = "float32",
        ranges: np.ndarray | None = None,
    ) -> np.ndarray:
        """float32 `[n, dimension]` embeddings of `texts`, each after its prompt: `prompt` itself,
        or the one named `prompt_name`, else the default prompt. `truncate_dim` keeps the first
        that many dimensions (Matryoshka); `normalize` makes each of unit length after that (as
        sentence-transformers' `encode(truncate_dim=..., normalize_embeddings=True)`: a truncated
        unit vector is no longer one, which cosine similarity does not mind and a dot product does).
        `precision` "int8", "uint8", "binary" or "ubinary" gives them quantized last
        (`bertlayers.tasks.embedding_quantization`; int8 over `ranges`, else the texts' own)."""
        texts = text_list(texts, "texts")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")
        prompt = chosen_prompt(self.prompts, self.default_prompt_name, prompt_name, prompt)
        if truncate_dim is not None and not 0 < int(truncate_dim) <= self.dimension:
            raise ValueError(f"truncate_dim must be in [1, {self.dimension}], got {truncate_dim}.")
        if not texts:
            return quantize_embeddings(np.zeros((0, truncate_dim or self.dimension), "float32"), precision)
        inputs = pack_in_chunks(self.packer, [prompt + text for text in texts])
        if not self.model.include_prompt:
            inputs["prompt_length"] = np.full(len(texts), self.prompt_length(prompt), "int32")
        embeddings = np.asarray(predict_by_length(self.model, inputs, batch_size=batch_size, verbose=0)["embedding"])
        if truncate_dim is not None:
            embeddings = embeddings[:, : int(truncate_dim)]
        if normalize:
            embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=-1, keepdims=True), 1e-12)
        return quantize_embeddings(embeddings.astype("float32"), precision, ranges=ranges)

    def prompt_length(self, prompt: str) -> int:
        """The leading tokens a text after `prompt` leaves out of the pooling where the model does
        not pool the prompt: the prompt packed alone without its trailing special token ([CLS] and
        the prompt's pieces), as sentence-transformers measures it; 0 for no prompt (nothing left out)."""
        if not prompt:
            return 0
        real = int(np.asarray(self.packer([prompt])["padding_mask"]).sum())
        return real - (1 if self.packer.checkpoint_tokenizer.layout.end else 0)

    def similarity(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """`[n, m]` scores of every row of `first` against every row of `second`, by the model's
        similarity function."""
        a, b = np.asarray(first, "float32"), np.asarray(second, "float32")
        if self.similarity_name == "dot":
            return a @ b.T
        if self.similarity_name == "cosine":
            unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)  # noqa: E731
            return unit(a) @ unit(b).T
        order = 2 if self.similarity_name == "euclidean" else 1
        return -np.linalg.norm(a[:, None, :] - b[None, :, :], ord=order, axis=-1)

    def save(self, path: str) -> None:
        """The model, its tokenizer, sequence length, prompts and similarity function, to a `.keras`
        file (atomically)."""
        settings = {
            "sequence_length": self.sequence_length,
            "prompts": self.prompts,
            "default_prompt_name": self.default_prompt_name,
            "similarity": self.similarity_name,
        }
        save_model(self.model, path, settings=settings)

    def save_huggingface(self, folder: str) -> str:
        """The embedder as a sentence-transformers folder that `SentenceTransformer(folder)` loads
        to the same embeddings, prompts, similarity function and sequence length
        (`bertlayers.convert.sentence_transformers.save_sentence_transformers`)."""
        return save_sentence_transformers(
            self.model, folder, self.prompts, self.default_prompt_name, self.similarity_name, self.sequence_length
        )

    def endpoint_parts(self, name: str = "dense") -> dict[str, EndpointPart]:
        """This embedder as a part of `bertlayers.export.export_endpoint`: {`name`: its model and
        served embedding at its sequence length}; the endpoint's `name`_embed signature takes
        `prompt_name` and `dimensions` as `export`'s `embed` does."""
        from bertlayers.export.serving_outputs import EmbeddingOutputs

        lengths = None if self.model.include_prompt else {n: self.prompt_length(p) for n, p in self.prompts.items()}
        outputs = EmbeddingOutputs(self.prompts, normalize=self.model.normalize, prompt_lengths=lengths)
        return {name: EndpointPart(self.model, outputs, self.sequence_length)}

    def export(self, base_dir: str, name: str, **settings) -> dict:
        """`bertlayers.export.export_for_serving`: NAME (ids in) and NAME_text (text in, embedding
        out) under `base_dir`, at this embedder's sequence length. NAME_text's `embed` signature
        also takes `prompt_name` (one of this embedder's prompts, or "") and `dimensions`
        (Matryoshka; 0: all), as `encode(prompt_name=..., truncate_dim=..., normalize=...)` gives
        them (`bertlayers.export.EmbeddingOutputs`)."""
        (part,) = self.endpoint_parts().values()
        settings.setdefault("sequence_length", part.sequence_length)
        return export_for_serving(part.model, name, base_dir=base_dir, outputs=part.outputs, **settings)
