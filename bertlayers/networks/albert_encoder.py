"""The ALBERT encoder network."""

import keras

from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.initializers import bert_initializer
from bertlayers.networks.encoder_base import EncoderBase


@keras.saving.register_keras_serializable(package="bertlayers")
class AlbertEncoder(EncoderBase):
    """ALBERT (Lan et al. 2019): factorized embedding and cross-layer parameter sharing.

    The vocabulary is embedded at width E and projected to H; `num_layer_groups` (G) distinct
    blocks are applied across the L layers, layer i using block ⌊i·G/L⌋ (G = 1: one block
    applied L times). Keyword arguments are the fields of `EncoderConfig`; `embedding_size`
    defaults to 128.
    """

    architecture = "albert"

    def __init__(self, embedding_size=128, **kwargs):
        super().__init__(embedding_size=embedding_size, **kwargs)

    def _make_embeddings(self, config, dtype):
        return FactorizedEmbedding(
            vocabulary_size=config.vocabulary_size,
            embedding_size=config.embedding_size,
            hidden_size=config.hidden_size,
            max_sequence_length=config.max_sequence_length,
            type_vocab_size=config.type_vocab_size,
            layer_norm_epsilon=config.layer_norm_epsilon,
            dropout=config.dropout,
            initializer=bert_initializer(config.initializer_range),
            dtype=dtype,
            name="embeddings",
        )

    def _num_distinct_blocks(self, config):
        return config.num_layer_groups

    def _block_index(self, config, depth):
        return depth * config.num_layer_groups // config.num_layers
