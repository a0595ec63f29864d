"""The ALBERT encoder network."""

import keras

from bertlayers.networks.encoder_base import EncoderBase, embeddings_for


@keras.saving.register_keras_serializable(package="bertlayers")
class AlbertEncoder(EncoderBase):
    """ALBERT (Lan et al. 2019): factorized embedding and cross-layer parameter sharing.

    The vocabulary is embedded at width E and projected to H; `num_layer_groups` (G) distinct
    blocks are applied across the L layers, layer i using block ⌊i·G/L⌋ (G = 1: one block
    applied L times). Keyword arguments are the fields of `EncoderConfig`; `embedding_size`
    defaults to 128.
    """

    architecture = "albert"
    shares_layers = True

    def __init__(self, embedding_size=128, **kwargs):
        super().__init__(embedding_size=embedding_size, **kwargs)

    def make_embeddings(self, config, dtype):
        # Always factorized: ALBERT checkpoints carry the E -> H projection even when E equals H.
        return embeddings_for(config, dtype, project_to=config.hidden_size)
