"""How DeBERTa-v3's discriminator shares the generator's token table (He et al. 2023, §3).

ELECTRA shares one table between its generator and discriminator, and both losses pull on it: the
generator's MLM pulls tokens of similar meaning together, the discriminator's replaced-token
detection pulls them apart (it must tell a token from its plausible replacement): a tug-of-war.
Gradient-disentangled embedding sharing (GDES) gives the discriminator

    E_D = sg(E_G) + E_Δ        (E_Δ starts at zero)

so the MLM loss alone trains E_G, the RTD loss alone trains E_Δ, and the discriminator still starts
from, and keeps reading, the generator's table. After pretraining E_D = E_G + E_Δ is one table
(`SharedTableEmbeddings.token_table`).
"""

import keras
from keras import ops

from bertlayers.layers.bert_embeddings import BertEmbeddings

SHARING = ("disentangled", "shared")


def _needs_source(name):
    return ValueError(
        f"{name} reads another model's token table, which a saved copy does not hold: load the whole "
        "pretrainer, or save its finished_encoder() (the table folded into one)."
    )


def _refer_to(layer, source):
    """`layer.source = source` without Keras tracking it: the source is another model's part, whose
    weights are not this layer's (nor saved, nor trained, with it)."""
    object.__setattr__(layer, "source", source)


@keras.saving.register_keras_serializable(package="bertlayers")
class DisentangledTokenEmbedding(keras.layers.Layer):
    """Token vectors from sg(source table) + a learned difference E_Δ `[V, E]` (zeros at first).

    Args:
      source: the generator's `keras.layers.ReversibleEmbedding` (built).

    Call args:
      token_ids: int `[batch, seq]`.

    Returns:
      `[batch, seq, E]`.
    """

    def __init__(self, source: keras.layers.Layer | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if source is None:
            raise _needs_source(type(self).__name__)
        _refer_to(self, source)

    def build(self, token_ids_shape=None):
        self.difference = self.add_weight(
            name="difference", shape=tuple(self.source.embeddings.shape), initializer="zeros"
        )
        self.built = True

    def table(self):
        """`[V, E]`: sg(E_G) + E_Δ."""
        return ops.stop_gradient(ops.convert_to_tensor(self.source.embeddings)) + self.difference

    def call(self, token_ids):
        return ops.take(ops.cast(self.table(), self.compute_dtype), token_ids, axis=0)  # [B, S, E]

    def compute_output_shape(self, token_ids_shape):
        return tuple(token_ids_shape) + (self.source.embeddings.shape[-1],)


@keras.saving.register_keras_serializable(package="bertlayers")
class SharedTableEmbeddings(BertEmbeddings):
    """A discriminator's embeddings (`BertEmbeddings`: its own segment and position tables, norm and
    dropout) whose token table comes from the generator's embeddings `source`:

      sharing="disentangled": sg(E_G) + E_Δ (GDES, DeBERTa-v3), the RTD loss training E_Δ alone;
      sharing="shared": E_G itself, both losses training it (ELECTRA's sharing of the table).

    Args (besides `BertEmbeddings`'): source, the generator's `BertEmbeddings` (built); sharing.
    """

    def __init__(self, source: BertEmbeddings | None = None, sharing: str = "disentangled", **kwargs) -> None:
        super().__init__(**kwargs)
        if sharing not in SHARING:
            raise ValueError(f"SharedTableEmbeddings: sharing must be one of {SHARING}, got {sharing!r}.")
        if source is None:
            raise _needs_source(type(self).__name__)
        if (source.vocabulary_size, source.embedding_size) != (self.vocabulary_size, self.embedding_size):
            raise ValueError(
                f"SharedTableEmbeddings: the source's table is [{source.vocabulary_size}, {source.embedding_size}], "
                f"these embeddings' [{self.vocabulary_size}, {self.embedding_size}]."
            )
        _refer_to(self, source)
        self.sharing = sharing
        if sharing == "shared":
            self.token_embedding = source.token_embedding
        else:
            self.token_embedding = DisentangledTokenEmbedding(
                source.token_embedding, dtype=self.dtype_policy, name="token_embedding"
            )

    def token_table(self):
        """The `[V, E]` table the discriminator reads: E_G + E_Δ, or E_G."""
        if self.sharing == "shared":
            return ops.convert_to_tensor(self.source.token_embedding.embeddings)
        return self.token_embedding.table()

    def get_config(self):
        config = super().get_config()
        config["sharing"] = self.sharing
        return config


def folded(encoder):
    """A standalone copy of `encoder` (an encoder over `SharedTableEmbeddings`): the same config
    and weights, its embeddings' token table E_G + E_Δ held as its own."""
    config = dict(encoder.get_config())
    config.pop("embedding_layer")
    alone = type(encoder).from_config(config)
    embeddings = encoder.embeddings
    token = {id(w) for w in embeddings.token_embedding.weights}
    rest = [ops.convert_to_numpy(w) for w in embeddings.weights if id(w) not in token]
    alone.embeddings.set_weights([ops.convert_to_numpy(embeddings.token_table())] + rest)
    for mine, theirs in zip(alone.layers, encoder.layers):
        if theirs is not embeddings:
            mine.set_weights(theirs.get_weights())
    return alone
