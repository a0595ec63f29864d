"""bertlayers' AdamW against Keras's own `keras.optimizers.AdamW` (the reference)."""

import keras
import numpy as np

from bertlayers.training.optimization import NO_DECAY, WarmupLinearDecay, create_optimizer


def _trained_weights(optimizer):
    keras.utils.set_random_seed(0)
    token_ids = keras.Input((5,), dtype="int32")
    hidden = keras.layers.LayerNormalization()(keras.layers.Embedding(50, 8)(token_ids))
    model = keras.Model(token_ids, keras.layers.Dense(3)(hidden))
    model.compile(optimizer=optimizer, loss="mse")
    rng = np.random.default_rng(1)
    # Targets far from the outputs: gradient norms well above 1, so clipping acts at every step.
    x, y = rng.integers(0, 50, (64, 5)), 10 * rng.normal(size=(64, 5, 3))
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    return model.get_weights()


def test_fused_adamw_matches_keras_adamw():
    ours = create_optimizer(1e-2, total_steps=20, warmup_steps=2, weight_decay=0.01, clip_global_norm=1.0)
    reference = keras.optimizers.AdamW(
        learning_rate=WarmupLinearDecay(1e-2, 20, 2), weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
    )
    reference.exclude_from_weight_decay(var_names=list(NO_DECAY))
    initial = _trained_weights(keras.optimizers.SGD(0.0))
    expected, got = _trained_weights(reference), _trained_weights(ours)
    for before, want, have in zip(initial, expected, got):
        assert np.abs(want - before).max() > 1e-3  # every weight, the sparse embedding too, moved
        np.testing.assert_allclose(have, want, atol=2e-6)


def test_layerwise_rates_scale_each_layers_first_step():
    """Adam's first step moves every weight by the learning rate (m / √v = ±1), so with layer-wise
    decay d the head moves by lr, block i of L by lr·d^(L−i) and the embeddings by lr·d^(L+1)
    (ε made negligible: the default 1e-6 shortens the steps of the smallest gradients)."""
    from bertlayers.models import SequenceClassifier
    from bertlayers.networks import BertEncoder

    model = SequenceClassifier(BertEncoder(vocabulary_size=50, num_layers=2, hidden_size=8, num_heads=2,
                                           intermediate_size=16, max_sequence_length=8, dropout=0.0), 3, dropout=0.0)
    lr, decay = 1e-3, 0.5
    optimizer = create_optimizer(lr, total_steps=10, warmup_steps=0, weight_decay=0.0, clip_global_norm=None,
                                 epsilon=1e-12, layerwise_decay=decay, model=model)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1, 50, (4, 8)).astype("int32"), "segment_ids": np.zeros((4, 8), "int32"),
         "padding_mask": np.ones((4, 8), "int32")}
    before = {id(v): np.array(v) for v in model.trainable_variables}
    model.fit(x, np.array([0, 1, 2, 0]), batch_size=4, epochs=1, verbose=0)

    def largest_move(variables):
        return max(float(np.abs(np.array(v) - before[id(v)]).max()) for v in variables)

    encoder = model.encoder
    np.testing.assert_allclose(largest_move(encoder.embeddings.trainable_variables), lr * decay**3, rtol=1e-3)
    for index, block in enumerate(encoder.transformer_layers):
        np.testing.assert_allclose(largest_move(block.trainable_variables), lr * decay ** (2 - index), rtol=1e-3)
    encoder_ids = {id(v) for v in encoder.trainable_variables}
    np.testing.assert_allclose(largest_move([v for v in model.trainable_variables if id(v) not in encoder_ids]), lr, rtol=1e-3)
