"""Embeddings kept in fewer bits for retrieval, and the search over them with rescoring, as
sentence-transformers defines them (`quantize_embeddings`, `semantic_search_faiss`):

  int8 / uint8     each dimension's range (its minimum and maximum over calibration embeddings)
                   cut into 255 steps: floor((x - min) / step), clipped to [0, 255] (int8: minus 128)
  binary / ubinary each dimension's sign, 8 to a byte (`np.packbits` of x > 0; binary: minus 128)

A corpus in 1 bit a dimension is 32x smaller than in float32 and is searched by Hamming distance;
rescoring takes `top_k * rescore_multiplier` candidates so found and scores them again with the
float query: against the candidates' bits (0 or 1) for binary, against their dequantized values for
int8. So a search keeps most of float32's ranking at a fraction of its memory.

    corpus = quantize_embeddings(passages, "ubinary")
    hits = quantized_search(queries, corpus, "ubinary", top_k=10)          # [(ids, scores)] per query

    ranges = quantization_ranges(calibration)                               # [2, dimension]
    corpus = quantize_embeddings(passages, "int8", ranges=ranges)
    hits = quantized_search(queries, corpus, "int8", top_k=10, ranges=ranges)
"""

from typing import Literal

import numpy as np

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
Precision = Literal["float32", "int8", "uint8", "binary", "ubinary"]


def _float_matrix(embeddings, what):
    array = np.asarray(embeddings)
    if array.dtype.kind not in "f":
        raise ValueError(f"{what} must be float embeddings, got dtype {array.dtype}.")
    if array.ndim != 2:
        raise ValueError(f"{what} must be [n, dimension], got shape {array.shape}.")
    return array


def _precision(precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")
    return precision


def quantization_ranges(calibration_embeddings: np.ndarray) -> np.ndarray:
    """`[2, dimension]`: each dimension's minimum and maximum over `calibration_embeddings`
    (`[n, dimension]`, n >= 2: one embedding gives no range)."""
    calibration = _float_matrix(calibration_embeddings, "calibration_embeddings")
    if len(calibration) < 2:
        raise ValueError(
            f"int8 ranges need at least 2 calibration embeddings, got {len(calibration)}: give ranges or more "
            "calibration embeddings."
        )
    return np.stack([calibration.min(axis=0), calibration.max(axis=0)])


def _steps(ranges):
    ranges = np.asarray(ranges, "float32")
    steps = (ranges[1] - ranges[0]) / 255
    return ranges, np.where(steps == 0, 1, steps)  # a constant dimension: any step keeps it at 0


def quantize_embeddings(
    embeddings: np.ndarray,
    precision: Precision,
    ranges: np.ndarray | None = None,
    calibration_embeddings: np.ndarray | None = None,
) -> np.ndarray:
    """`embeddings` (`[n, dimension]` floats) in `precision`: int8 / uint8 `[n, dimension]` over
    `ranges` (else those of `calibration_embeddings`, else of `embeddings` themselves), binary /
    ubinary `[n, ceil(dimension / 8)]` bytes, float32 unchanged."""
    precision = _precision(precision)
    embeddings = _float_matrix(embeddings, "embeddings")
    if precision == "float32":
        return embeddings.astype("float32")
    if not len(embeddings):  # nothing to calibrate: the empty array of the precision's shape
        width = -(-embeddings.shape[1] // 8) if precision.endswith("binary") else embeddings.shape[1]
        return np.zeros((0, width), np.int8 if precision in ("int8", "binary") else np.uint8)
    if precision.endswith("binary"):
        packed = np.packbits(embeddings > 0, axis=-1)
        return (packed.astype(np.int16) - 128).astype(np.int8) if precision == "binary" else packed
    if ranges is None:
        ranges = quantization_ranges(embeddings if calibration_embeddings is None else calibration_embeddings)
    ranges = np.asarray(ranges)
    if ranges.shape != (2, embeddings.shape[1]):
        raise ValueError(f"ranges must be [2, {embeddings.shape[1]}] (minimum, maximum), got shape {ranges.shape}.")
    ranges, steps = _steps(ranges)
    levels = np.clip(np.floor((embeddings - ranges[0]) / steps), 0, 255)
    return (levels - 128).astype(np.int8) if precision == "int8" else levels.astype(np.uint8)


def dequantize_embeddings(embeddings: np.ndarray, precision: Precision, ranges: np.ndarray) -> np.ndarray:
    """int8 / uint8 embeddings back in the float coordinates of `ranges` (each at its step's lower end)."""
    if precision not in ("int8", "uint8"):
        raise ValueError(f"Only int8 and uint8 embeddings dequantize, got {precision!r}.")
    ranges, steps = _steps(ranges)
    levels = np.asarray(embeddings).astype(np.float64) + (128 if precision == "int8" else 0)
    return levels * steps + ranges[0]


def _unpacked_bits(corpus, precision, dimension):
    as_bytes = (corpus.astype(np.int16) + 128).astype(np.uint8) if precision == "binary" else corpus
    return np.unpackbits(as_bytes, axis=-1)[..., :dimension]  # packbits padded to whole bytes


def quantized_search(
    query_embeddings: np.ndarray,
    corpus: np.ndarray,
    precision: Precision,
    top_k: int = 10,
    ranges: np.ndarray | None = None,
    rescore: bool = True,
    rescore_multiplier: int = 2,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact search of float `query_embeddings` (`[q, dimension]`) over a `corpus` quantized to
    `precision`: per query, the ids of its `top_k` passages and their scores, best first.

    binary / ubinary: candidates by Hamming distance to the query's bits (score: the negated
    distance); int8 / uint8: by the dot product of the quantized query and corpus (`ranges`, those
    the corpus was quantized with, are needed); float32: the dot product. With `rescore`, the
    `top_k * rescore_multiplier` best candidates are scored again by the float query's dot product
    with their bits or dequantized values, and the best `top_k` of those kept."""
    precision = _precision(precision)
    queries = _float_matrix(query_embeddings, "query_embeddings")
    corpus = np.asarray(corpus)
    if top_k < 1 or rescore_multiplier < 1:
        raise ValueError(f"top_k and rescore_multiplier must be positive, got {top_k} and {rescore_multiplier}.")
    if precision in ("int8", "uint8") and ranges is None:
        raise ValueError(f"An {precision} corpus is searched with the ranges it was quantized with: give ranges.")
    dimension = queries.shape[1]
    if precision == "float32":
        scores = queries @ corpus.astype("float32").T
    elif precision.endswith("binary"):
        query_bits = np.packbits(queries > 0, axis=-1)
        corpus_bits = (corpus.astype(np.int16) + 128).astype(np.uint8) if precision == "binary" else corpus
        # Hamming distances a block of queries at a time: [block, n, bytes] at once, not [q, n, bytes].
        block = max(1, 2**26 // max(1, corpus_bits.size))
        scores = -np.concatenate(
            [
                np.bitwise_count(query_bits[i : i + block, None, :] ^ corpus_bits[None]).sum(axis=-1, dtype=np.int64)
                for i in range(0, len(query_bits), block)
            ]
        ).astype(np.float64)
    else:
        quantized = quantize_embeddings(queries, precision, ranges=ranges).astype(np.int64)
        scores = (quantized @ corpus.astype(np.int64).T).astype(np.float64)
    rescoring = rescore and precision != "float32"
    k = min(len(corpus), top_k * (rescore_multiplier if rescoring else 1))
    # Stable order: ties (common under Hamming distance) go to the lower id.
    candidates = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    candidate_scores = np.take_along_axis(scores, candidates, axis=1)
    if rescoring:
        if precision.endswith("binary"):
            values = _unpacked_bits(corpus[candidates], precision, dimension).astype(np.float64)
        else:
            values = dequantize_embeddings(corpus[candidates], precision, ranges)
        candidate_scores = np.einsum("qd,qkd->qk", queries.astype(np.float64), values)
        order = np.argsort(-candidate_scores, axis=1, kind="stable")[:, :top_k]
        candidates = np.take_along_axis(candidates, order, axis=1)
        candidate_scores = np.take_along_axis(candidate_scores, order, axis=1)
    return [(ids[:top_k], found[:top_k]) for ids, found in zip(candidates, candidate_scores)]
