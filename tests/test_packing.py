"""Unpadded execution: sequences packed into rows of a token budget give, for every sequence, what
the padded computation gives it (1e-5, float32): the encoders' states and summaries, a
classifier's logits and its training step, a masked LM's logits."""

import keras
import numpy as np
import pytest

from bertlayers.families.eurobert import eurobert_config
from bertlayers.families.gemma3 import gemma3_config
from bertlayers.families.gte import gte_config
from bertlayers.families.modernbert import modernbert_config
from bertlayers.families.qwen3 import qwen3_config
from bertlayers.models import SequenceClassifier
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.networks import EncoderConfig, build_encoder
from bertlayers.networks.packing import pack_sequences, packed_classifier, packed_encoder, packed_labels, unpacked

ATOL = 1e-5
SMALL = dict(vocabulary_size=60, hidden_size=16, num_heads=4, intermediate_size=24, max_sequence_length=32)
CONFIGS = {
    "bert": EncoderConfig(num_layers=2, dropout=0.0, attention_dropout=0.0, **SMALL),
    "modernbert": modernbert_config(
        4, 16, 4, 12, window=4, local_theta=50.0, vocabulary_size=60, max_sequence_length=32
    ),
    "modernbert_mean": modernbert_config(3, 16, 4, 12, window=6, pooling_position="mean", vocabulary_size=60),
    "gte": gte_config(
        2,
        16,
        4,
        24,
        rotary_theta=300.0,
        type_vocab_size=2,
        dropout=0.0,
        attention_dropout=0.0,
        vocabulary_size=60,
        max_sequence_length=32,
    ),
    "eurobert": eurobert_config(
        2, 16, 4, 24, num_key_value_heads=2, rotary_theta=200.0, vocabulary_size=60, max_sequence_length=32
    ),
    # Causal attention per packed sequence, the summary at each one's last token; heads of 8 at H / heads = 4.
    "qwen3": qwen3_config(
        2, 16, 4, 24, num_key_value_heads=2, head_dim=8, rotary_theta=200.0, vocabulary_size=60, max_sequence_length=32
    ),
    # Sandwich norms, a window and two rotary bases, the scaled embedding.
    "gemma3": gemma3_config(
        2,
        16,
        4,
        24,
        num_key_value_heads=2,
        head_dim=8,
        window=4,
        layer_types=("sliding_attention", "full_attention"),
        global_theta=500.0,
        local_theta=50.0,
        vocabulary_size=60,
        max_sequence_length=32,
    ),  # fmt: skip
}


def _padded(rng, count=7, length=12, segments=False):
    lengths = rng.integers(2, length + 1, size=count)
    lengths[0] = length
    padding_mask = (np.arange(length)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(3, 60, size=(count, length)).astype("int32") * padding_mask
    segment_ids = np.zeros_like(token_ids)
    if segments:
        segment_ids = ((np.arange(length)[None, :] >= lengths[:, None] // 2) * padding_mask).astype("int32")
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}, lengths


@pytest.mark.other_backend_cases("bert", "modernbert")  # absolute and rotary positions
@pytest.mark.parametrize("name", list(CONFIGS))
def test_packed_encoder_states_and_summaries_equal_the_padded_ones(name):
    keras.utils.set_random_seed(1)
    encoder = build_encoder(CONFIGS[name])
    padded, lengths = _padded(np.random.default_rng(0), segments=CONFIGS[name].type_vocab_size > 1)
    expected = encoder(padded)
    packed, placement = pack_sequences(padded, token_budget=24, max_sequences=4)
    assert packed["token_ids"].shape[0] < len(lengths)  # fewer rows than sequences: padding saved
    outputs = packed_encoder(encoder, max_sequences=4)(packed)
    states = unpacked(outputs["sequence_output"], placement, lengths)
    for index, length in enumerate(lengths):
        np.testing.assert_allclose(states[index], np.asarray(expected["sequence_output"])[index, :length], atol=ATOL)
    np.testing.assert_allclose(unpacked(outputs["pooled_output"], placement), expected["pooled_output"], atol=ATOL)


@pytest.mark.slow
def test_a_packed_training_step_equals_the_padded_one():
    """One SGD step of a ModernBERT-pattern classifier over seven sequences, padded (one batch) or
    packed (the rows as one batch, `packed_labels` weighting the slots): the same loss, the same weights after."""
    rng = np.random.default_rng(2)
    padded, _ = _padded(rng)
    labels = rng.integers(0, 3, size=len(padded["token_ids"])).astype("int32")
    results = []
    for packing in (False, True):
        keras.utils.set_random_seed(3)
        classifier = SequenceClassifier(build_encoder(CONFIGS["modernbert"]), 3, dropout=0.0)
        model, x, y, weights = classifier, padded, labels, None
        if packing:
            x, placement = pack_sequences(padded, token_budget=24, max_sequences=4)
            model = packed_classifier(classifier, max_sequences=4)
            y, weights = packed_labels(labels, placement, len(x["token_ids"]), 4)
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
        )
        history = model.fit(
            x,
            {"logits": y},
            sample_weight=None if weights is None else {"logits": weights},
            batch_size=len(x["token_ids"]),
            epochs=1,
            verbose=0,
        )
        results.append((history.history["loss"][0], [np.asarray(w) for w in classifier.weights]))
    (loss, weights), (packed_loss, packed_weights) = results
    np.testing.assert_allclose(packed_loss, loss, rtol=1e-5)
    for before, after in zip(weights, packed_weights):
        np.testing.assert_allclose(after, before, atol=ATOL)


@pytest.mark.parametrize("name", ["bert", "modernbert"])
def test_packed_masked_lm_logits_equal_the_padded_ones(name):
    keras.utils.set_random_seed(4)
    encoder = build_encoder(CONFIGS[name])
    pretrainer = BertPretrainer(encoder, next_sentence=False)
    padded, lengths = _padded(np.random.default_rng(5))
    positions = np.stack(
        [np.sort(np.random.default_rng(i).choice(length, 2, replace=False)) for i, length in enumerate(lengths)]
    )
    expected = pretrainer({**padded, "masked_positions": positions.astype("int32")})["mlm"]
    packed, placement = pack_sequences(padded, token_budget=24, max_sequences=4)
    states = packed_encoder(encoder, max_sequences=4)(packed)["sequence_output"]
    for index, (row, _, start) in enumerate(placement):
        logits = pretrainer.lm_head(states[row : row + 1], (positions[index : index + 1] + start).astype("int32"))
        np.testing.assert_allclose(logits[0], np.asarray(expected)[index], atol=1e-4)


def test_packing_refuses_what_does_not_fit():
    padded, _ = _padded(np.random.default_rng(6))
    with pytest.raises(ValueError, match="does not fit a packed row of token_budget 8"):
        pack_sequences(padded, token_budget=8)
    padded["padding_mask"][3] = 0
    with pytest.raises(ValueError, match="Sequence 3 has no real token"):
        pack_sequences(padded, token_budget=24)
    # Left padding, or a hole, would keep padding and drop real tokens: refused, the row named.
    padded["padding_mask"][3] = padded["padding_mask"][2][::-1]
    with pytest.raises(ValueError, match=r"Sequence 3's padding_mask \[0, .*1\] is not its real tokens first"):
        pack_sequences(padded, token_budget=24)
    padded["padding_mask"][3] = padded["padding_mask"][2]
    padded["padding_mask"][3][1] = 0
    with pytest.raises(ValueError, match=r"Sequence 3's padding_mask \[1, 0, 1"):
        pack_sequences(padded, token_budget=24)


def test_pack_sequences_places_every_token_once_within_the_budget():
    """Best fit, longest first: rows hold at most the budget and K sequences, every real token lands
    once at its placement, and the rows are nearly full (a thousand real-length sequences)."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 61, size=1000)
    padding_mask = (np.arange(64)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(3, 60, size=(1000, 64)).astype("int32") * padding_mask
    padded = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": padding_mask}
    packed, placement = pack_sequences(padded, token_budget=128, max_sequences=8)
    assert (packed["sequence_ids"].max(axis=1) <= 8).all()
    assert (packed["sequence_ids"] > 0).sum() == lengths.sum()  # every real token, once
    for index, tokens in enumerate(unpacked(packed["token_ids"], placement, lengths)):
        np.testing.assert_array_equal(tokens, token_ids[index, : lengths[index]])
    row, slot, start = placement[0]
    assert (packed["sequence_ids"][row, start : start + lengths[0]] == slot + 1).all()
    assert lengths.sum() / packed["token_ids"].size > 0.95
