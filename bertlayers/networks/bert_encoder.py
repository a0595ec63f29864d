"""The BERT encoder network."""

import keras

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.initializers import bert_initializer
from bertlayers.networks.encoder_base import EncoderBase


@keras.saving.register_keras_serializable(package="bertlayers")
class BertEncoder(EncoderBase):
    """BERT (Devlin et al. 2018): embeddings, then L distinct Transformer encoder blocks.

    Keyword arguments are the fields of `EncoderConfig` (validated there), plus `dtype`
    (e.g. "mixed_bfloat16") and `name`. An `embedding_size` different from `hidden_size`
    gives a factorized embedding (as ELECTRA's small models use).

    Example:
      encoder = BertEncoder.from_preset("bert_tiny")
      outputs = encoder({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
      outputs["sequence_output"]  # [batch, seq, 128]
    """

    architecture = "bert"

    def _make_embeddings(self, config, dtype):
        common = dict(
            vocabulary_size=config.vocabulary_size,
            max_sequence_length=config.max_sequence_length,
            type_vocab_size=config.type_vocab_size,
            layer_norm_epsilon=config.layer_norm_epsilon,
            dropout=config.dropout,
            initializer=bert_initializer(config.initializer_range),
            dtype=dtype,
            name="embeddings",
        )
        if config.embedding_size in (None, config.hidden_size):
            return BertEmbeddings(embedding_size=config.hidden_size, **common)
        return FactorizedEmbedding(
            embedding_size=config.embedding_size, hidden_size=config.hidden_size, **common
        )
