"""Sentence embeddings: an encoder's tokens pooled into one vector a text (sentence-transformers'
use of BERT-family models), for similarity, retrieval and clustering."""

import keras

from bertlayers.layers.sequence_pooling import SequencePooling
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class SentenceEmbedder(EncoderModel):
    """embedding `[batch, hidden]`: the encoder's sequence output pooled over the real tokens.

    Inputs: the encoder's. Output `embedding`: float32 `[batch, hidden]`, of unit length with
    `normalize` (so a dot product is the cosine). Exported (`export_for_serving`), its text model
    takes `text` and returns `embedding`.

    Args:
      encoder: a pretrained encoder (all-MiniLM-L6-v2 is trained for `pooling="mean"`).
      pooling: "mean" over the real tokens, "first" ([CLS]) or "max" (`SequencePooling`).
      normalize: L2-normalize the embedding.
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        pooling: str = "mean",
        normalize: bool = True,
        name: str = "sentence_embedder",
        **kwargs,
    ) -> None:
        inputs = encoder_inputs()
        pool = SequencePooling(pooling, normalize=normalize, name="pooling")
        embedding = pool(encoder(inputs)["sequence_output"], inputs["padding_mask"])  # [B, H]
        super().__init__(inputs=inputs, outputs={"embedding": embedding}, name=name, **kwargs)
        self.encoder = encoder
        self.pooling = pool.mode
        self.normalize = bool(normalize)

    def _constructor_args(self):
        return {"pooling": self.pooling, "normalize": self.normalize}

    def default_losses(self):
        raise ValueError("A SentenceEmbedder has no loss of its own: train it inside a model that compares embeddings.")
