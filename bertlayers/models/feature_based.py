"""Feature-based use of an encoder (ELMo; BERT section 5.3): the encoder stays frozen, a
learned scalar mix of all its hidden states feeds a small task network.

    h_mix = γ · Σ_j softmax(s)_j · h_j    over the embedding output and every layer (j = 0..L)
    features = BiLSTM(h_mix)              per token (tagging) or final states (classification)

Only γ, s, the BiLSTM and the task head train. The encoder runs in inference mode (no
dropout), as a fixed feature extractor would, and no gradient flows back into it.
"""

import keras

from bertlayers.layers.bidirectional_lstm import BidirectionalLSTM
from bertlayers.layers.scalar_mix import ScalarMix


class FrozenHiddenStates(keras.layers.Layer):
    """The encoder's L + 1 hidden states computed with `training=False` whatever the caller
    passes (a functional graph hands its own `training` to every layer it calls).

    Call args: the encoder's inputs dict. Returns: L + 1 tensors `[batch, seq, H]`.
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        # Held in a closure, not tracked: the model owning this layer owns the encoder.
        self._encoder = lambda: encoder
        self.built = True

    def call(self, inputs):
        outputs = self._encoder()(inputs, training=False)
        return [outputs["embedding_output"], *outputs["encoder_outputs"]]

    def compute_output_spec(self, inputs):
        spec = self._encoder().compute_output_spec(inputs)
        return [spec["embedding_output"], *spec["encoder_outputs"]]


def feature_based_features(encoder, inputs, lstm_units, return_sequences):
    """Freeze `encoder` and build the mixed, BiLSTM-encoded features over `inputs`.

    Returns `[batch, seq, 2 * lstm_units]` (`return_sequences`) or `[batch, 2 * lstm_units]`.
    """
    encoder.trainable = False
    dtype = encoder.layer_dtype_policy
    hidden_states = FrozenHiddenStates(encoder, dtype=dtype, name="frozen_hidden_states")(inputs)  # (L+1) x [B, S, H]
    mixed = ScalarMix(dtype=dtype, name="scalar_mix")(hidden_states)  # [B, S, H]
    lstm = BidirectionalLSTM(lstm_units, return_sequences=return_sequences, dtype=dtype, name="task_network")
    return lstm(mixed, inputs["padding_mask"])  # [B, S, 2U] or [B, 2U]
