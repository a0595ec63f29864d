"""Sentence embeddings: an encoder's tokens pooled into one vector a text (sentence-transformers'
use of BERT-family models), for similarity, retrieval and clustering."""

import keras

from bertlayers.layers.sequence_pooling import SequencePooling, UnitLength
from bertlayers.models.encoder_model import INPUT_NAMES, EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class SentenceEmbedder(EncoderModel):
    """embedding `[batch, dimension]`: the encoder's sequence output pooled over the real tokens,
    then through `dense` layers, as sentence-transformers' `Transformer`, `Pooling`, `Dense` and
    `Normalize` modules compute it.

    Inputs: the encoder's, and with `include_prompt=False` `prompt_length` int32 `[batch]`. Output `embedding`: float32 `[batch, dimension]` (the encoder's width,
    or the last dense layer's), of unit length with `normalize` (so a dot product is the cosine).
    Exported (`export_for_serving`), its text model takes `text` and returns `embedding`.

    Args:
      encoder: a pretrained encoder (all-MiniLM-L6-v2 is trained for `pooling="mean"`).
      pooling: a `SequencePooling` mode: "mean" over the real tokens, "first" ([CLS]), "last",
        "max", "weighted_mean" or "mean_sqrt_len".
      normalize: L2-normalize the embedding (after the dense layers).
      dense: dense layers after the pooling, each {"units", "activation" (a Keras name: "tanh",
        "linear", ...), "use_bias"}.
      include_prompt: False leaves a text's first `prompt_length` real tokens ([CLS] and the
        prompt's pieces) out of the pooling, as sentence-transformers' `Pooling(include_prompt=False)`
        does; the encoder still reads them. `TextEmbedder.encode` gives the length.
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        pooling: str = "mean",
        normalize: bool = True,
        name: str = "sentence_embedder",
        dense: list[dict] | None = None,
        include_prompt: bool = True,
        **kwargs,
    ) -> None:
        inputs = encoder_inputs()
        dense = [dict(layer) for layer in dense or ()]
        pool = SequencePooling(pooling, normalize=normalize and not dense, name="pooling")
        sequence = encoder({name: inputs[name] for name in INPUT_NAMES})["sequence_output"]
        if include_prompt:
            embedding = pool(sequence, inputs["padding_mask"])  # [B, H]
        else:
            inputs["prompt_length"] = keras.Input(shape=(), dtype="int32", name="prompt_length")
            embedding = pool(sequence, inputs["padding_mask"], inputs["prompt_length"])  # [B, H]
        for index, layer in enumerate(dense):
            embedding = keras.layers.Dense(
                int(layer["units"]),
                activation=layer.get("activation", "linear"),
                use_bias=bool(layer.get("use_bias", True)),
                dtype=encoder.layer_dtype_policy,
                name=f"dense_{index}",
            )(embedding)  # [B, units]
        if dense and normalize:
            embedding = UnitLength(name="normalize")(embedding)
        super().__init__(inputs=inputs, outputs={"embedding": embedding}, name=name, **kwargs)
        self.encoder = encoder
        self.pooling = pool.mode
        self.normalize = bool(normalize)
        self.dense = dense
        self.include_prompt = bool(include_prompt)

    def _constructor_args(self):
        arguments = {"pooling": self.pooling, "normalize": self.normalize, "dense": self.dense or None}
        return arguments if self.include_prompt else {**arguments, "include_prompt": False}

    def default_losses(self):
        raise ValueError("A SentenceEmbedder has no loss of its own: train it inside a model that compares embeddings.")
