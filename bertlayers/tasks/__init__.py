"""Task models that take text: a checkpoint's tokenizer and a task model in one object, which
fits on strings and labels, predicts on strings and exports for serving."""

from bertlayers.tasks.embedding_quantization import (
    dequantize_embeddings,
    quantization_ranges,
    quantize_embeddings,
    quantized_search,
)
from bertlayers.tasks.text_answerer import TextAnswerer
from bertlayers.tasks.text_classifier import TextClassifier
from bertlayers.tasks.text_embedder import TextEmbedder
from bertlayers.tasks.text_multi_vector_encoder import TextMultiVectorEncoder
from bertlayers.tasks.text_reranker import TextReranker
from bertlayers.tasks.text_sparse_encoder import TextSparseEncoder
from bertlayers.tasks.text_tagger import TextTagger, words_of

__all__ = [
    "TextAnswerer",
    "TextClassifier",
    "TextEmbedder",
    "TextMultiVectorEncoder",
    "TextReranker",
    "TextSparseEncoder",
    "TextTagger",
    "dequantize_embeddings",
    "quantization_ranges",
    "quantize_embeddings",
    "quantized_search",
    "words_of",
]
