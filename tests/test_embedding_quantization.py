"""Embedding quantization and the rescored search over a quantized corpus, against
sentence-transformers' own (`quantize_embeddings`, `semantic_search_faiss`; recorded by
tests/fixtures/record_embedding_quantization.py)."""

import os

import numpy as np
import pytest

from bertlayers.tasks import dequantize_embeddings, quantization_ranges, quantize_embeddings, quantized_search

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "embedding_quantization.npz")


@pytest.fixture(scope="module")
def reference():
    return np.load(FIXTURE)


def test_quantized_embeddings_equal_sentence_transformers(reference):
    corpus = reference["corpus"]
    np.testing.assert_allclose(quantization_ranges(corpus), reference["ranges"])
    for precision in ("int8", "uint8", "binary", "ubinary"):
        quantized = quantize_embeddings(corpus, precision, calibration_embeddings=corpus)
        assert quantized.dtype == reference[precision].dtype, precision
        np.testing.assert_array_equal(quantized, reference[precision], err_msg=precision)
    assert reference["ubinary"].nbytes * 32 == corpus.nbytes  # 1 bit a dimension, not 32
    # Dequantized int8 lies within one step below the value it came from.
    ranges = reference["ranges"]
    restored = dequantize_embeddings(reference["int8"], "int8", ranges)
    step = (ranges[1] - ranges[0]) / 255
    assert np.all(restored <= corpus + 1e-6) and np.all(corpus - restored <= step + 1e-6)


@pytest.mark.parametrize("precision", ["ubinary", "uint8"])
def test_the_rescored_search_finds_and_scores_what_sentence_transformers_does(reference, precision):
    """The top 10 of 300 for 20 queries, 40 candidates rescored by the float query: the same ids in
    the same order and the same scores as faiss's exact search in sentence-transformers."""
    hits = quantized_search(
        reference["queries"],
        reference[precision],
        precision,
        top_k=10,
        ranges=reference["ranges"],
        rescore_multiplier=4,
    )
    np.testing.assert_array_equal(np.stack([ids for ids, _ in hits]), reference[f"search.{precision}.ids"])
    np.testing.assert_allclose(np.stack([s for _, s in hits]), reference[f"search.{precision}.scores"], rtol=1e-6)


def test_bad_input_is_refused_by_name(reference):
    corpus = reference["corpus"]
    with pytest.raises(ValueError, match="precision must be one of.*'int4'"):
        quantize_embeddings(corpus, "int4")
    with pytest.raises(ValueError, match="must be float embeddings, got dtype int8"):
        quantize_embeddings(reference["int8"], "int8")
    with pytest.raises(ValueError, match=r"ranges must be \[2, 64\].*\(2, 32\)"):
        quantize_embeddings(corpus, "int8", ranges=np.zeros((2, 32)))
    with pytest.raises(ValueError, match="at least 2 calibration embeddings, got 1"):
        quantize_embeddings(corpus[:1], "int8")
    with pytest.raises(ValueError, match="give ranges"):
        quantized_search(reference["queries"], reference["int8"], "int8")
    assert quantize_embeddings(corpus[:0], "ubinary").shape == (0, 8)
