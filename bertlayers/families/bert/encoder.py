"""The BERT encoder network."""

import keras

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
