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


def test_layerwise_decay_scales_each_layers_step():
    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import SequenceClassifier
    from bertlayers.training.optimization import layerwise_decay_multipliers

    model = SequenceClassifier(
        BertEncoder(
            vocabulary_size=50, num_layers=2, hidden_size=8, num_heads=2, intermediate_size=16, max_sequence_length=8
        ),
        2,
    )
    multipliers = layerwise_decay_multipliers(model, 0.5)
    by_layer = {}
    for v in model.trainable_variables:
        by_layer.setdefault(v.path.split("/")[0], set()).add(multipliers[id(v)])
    assert by_layer == {
        "embeddings": {0.125},
        "transformer_layer_0": {0.25},
        "transformer_layer_1": {0.5},
        "pooler": {1.0},
        "head": {1.0},
    }
    optimizer = create_optimizer(1e-2, 10, 0, weight_decay=0.0, clip_global_norm=None, layerwise_decay=0.5, model=model)
    variables = model.trainable_variables
    before = [np.asarray(v).copy() for v in variables]
    # Adam's first step moves every weight by lr · sign(gradient): here lr · multiplier.
    optimizer.apply([np.ones(v.shape, "float32") for v in variables], variables)
    for v, old in zip(variables, before):
        np.testing.assert_allclose(old - np.asarray(v), 1e-2 * multipliers[id(v)], rtol=1e-3)
