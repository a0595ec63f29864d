"""Length-aware batches: every example once per epoch, each batch cut to its longest, outputs as
the fixed-length path gives them."""

import numpy as np
import pytest

from bertlayers import backend
from bertlayers.families.bert import BertEncoder
from bertlayers.models import SequenceClassifier, SpanPredictor, TokenClassifier
from bertlayers.training.length_batching import _predictor_of, length_batches, per_token_outputs, predict_by_length

TINY = dict(
    vocabulary_size=100, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=64
)
FULL = 48


def examples(count, seed=0):
    """`count` inputs padded to FULL with real lengths 3..FULL; the example's index as its label."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, FULL + 1, count)
    mask = (np.arange(FULL)[None, :] < lengths[:, None]).astype("int32")
    x = {
        "token_ids": rng.integers(5, 100, (count, FULL)).astype("int32") * mask,
        "segment_ids": np.zeros((count, FULL), "int32"),
        "padding_mask": mask,
    }
    return x, lengths


@pytest.mark.parametrize("group_by_length", [False, True])
def test_training_batches_cover_every_example_once_and_are_cut_to_their_longest(group_by_length):
    x, lengths = examples(203)
    index = np.arange(203)
    tags = np.tile(index[:, None], (1, FULL)) * x["padding_mask"]  # per-token labels, 0 past the end
    dataset = length_batches(
        x,
        {"ids": index, "tags": tags},
        {"tags": x["padding_mask"].astype("float32")},
        batch_size=8,
        token_outputs={"tags"},
        shuffle=True,
        seed=3,
        group_by_length=group_by_length,
        group_size=5,
    )
    assert dataset.cardinality().numpy() == 26
    epochs = []
    for _ in range(2):
        seen = []
        for batch_x, batch_y, batch_w in dataset:
            ids = batch_y["ids"].numpy()
            # The exact longest; under JAX, which compiles a step per shape, rounded up to a
            # multiple of 16 (at most the full length).
            multiple = backend.length_multiple()
            cut = batch_x["token_ids"].shape[1]
            assert cut == min(-(-lengths[ids].max() // multiple) * multiple, FULL), (cut, lengths[ids].max())
            assert batch_y["tags"].shape[1] == batch_w["tags"].shape[1] == cut
            np.testing.assert_array_equal(batch_x["token_ids"].numpy(), x["token_ids"][ids, :cut])
            np.testing.assert_array_equal(batch_y["tags"].numpy(), tags[ids, :cut])
            seen.append(ids)
        assert sorted(np.concatenate(seen)) == list(range(203))
        epochs.append(np.concatenate(seen))
    assert not np.array_equal(epochs[0], epochs[1]), "reshuffled every epoch"
    # Grouped batches waste far less padding than the same batches drawn at random would.
    padded = sum(lengths[ids].max() * len(ids) for ids in np.split(epochs[0], range(8, 203, 8)))
    shuffled = np.random.default_rng(0).permutation(203)
    padded_at_random = sum(lengths[ids].max() * len(ids) for ids in np.split(shuffled, range(8, 203, 8)))
    assert (padded < 0.85 * padded_at_random) == group_by_length


def test_ungrouped_training_batches_do_not_depend_on_the_lengths():
    # Which examples share a batch is the shuffle's alone, as with fixed-length batches: the
    # same seed over the same examples with other lengths gives the same batches.
    def batches(x, group_by_length):
        dataset = length_batches(
            x,
            {"ids": np.arange(120)},
            batch_size=8,
            shuffle=True,
            seed=5,
            group_by_length=group_by_length,
            group_size=5,
        )
        return [tuple(batch_y["ids"].numpy()) for _, batch_y in dataset.take(15)]

    x, _ = examples(120, seed=1)
    reversed_lengths = {name: value[::-1].copy() for name, value in x.items()}  # example i takes 119-i's
    assert batches(x, False) == batches(reversed_lengths, False)
    assert batches(x, True) != batches(reversed_lengths, True)


@pytest.mark.parametrize(
    "options, left_out",
    [
        (dict(shuffle=True, seed=0), "random ones"),
        (dict(), "the longest"),  # evaluation: sorted by length, the longest last
        (dict(cut=False), "the last"),
    ],
)
def test_a_pass_shared_by_devices_warns_of_the_examples_it_leaves_out(caplog, options, left_out):
    """Devices share every batch equally (`examples_multiple`), so a pass takes a multiple of
    them; the rest is left out, said in a warning with which ones (not counted again by each
    caller)."""
    x, lengths = examples(10)
    with caplog.at_level("WARNING", logger="bertlayers.training.length_batching"):
        dataset = length_batches(x, {"ids": np.arange(10)}, batch_size=4, examples_multiple=3, **options)
    seen = np.concatenate([batch_y["ids"].numpy() for _, batch_y in dataset])
    assert len(seen) == 9 and len(set(seen)) == 9
    missing = (set(range(10)) - set(seen)).pop()
    if left_out == "the longest":
        assert lengths[missing] == lengths.max()
    if left_out == "the last":
        assert missing == 9
    assert f"Every pass leaves out 1 of 10 examples ({left_out}): 3 devices" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="bertlayers.training.length_batching"):
        length_batches(x, {"ids": np.arange(10)}, batch_size=4, examples_multiple=2)
    assert "leaves out" not in caplog.text


def test_evaluation_batches_are_sorted_and_positions_are_never_cut():
    x, lengths = examples(40)
    positions = lengths - 1  # a SQuAD-style label: an index into the sequence, `[N]`
    dataset = length_batches(x, {"start": positions}, batch_size=16, token_outputs={"start"})
    cuts = [batch_x["token_ids"].shape[1] for batch_x, _ in dataset]
    assert cuts == sorted(cuts) and cuts[-1] <= FULL
    got = np.concatenate([batch_y["start"].numpy() for _, batch_y in dataset])
    np.testing.assert_array_equal(got, np.sort(positions, kind="stable"))


@pytest.mark.parametrize(
    "build",
    [
        lambda e: SequenceClassifier(e, 3),
        lambda e: TokenClassifier(e, 4),
        SpanPredictor,
    ],
)
@pytest.mark.slow
def test_predict_by_length_gives_what_predict_gives(build):
    x, lengths = examples(37, seed=1)
    model = build(BertEncoder(**TINY))
    if isinstance(model, SpanPredictor):
        x["span_mask"] = x["padding_mask"]
    expected = model.predict(x, batch_size=8, verbose=0)
    got = predict_by_length(model, x, batch_size=8, verbose=0)
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert got[name].shape == value.shape
        if name in per_token_outputs(model):
            # Outputs at padding are not defined by the inputs; compare the real tokens.
            real = x["padding_mask"].astype(bool)
            np.testing.assert_allclose(got[name][real], value[real], atol=1e-5)
        else:
            np.testing.assert_allclose(got[name], value, atol=1e-5)


def test_a_models_predictor_is_made_once_and_freed_with_the_model():
    """The predictor `predict_by_length` uses under TF workers or across JAX processes: one a
    model (each shape compiles once), and not a reference that keeps a trained model alive."""
    import gc
    import weakref

    model = SequenceClassifier(BertEncoder(**TINY), 3)
    x, _ = examples(4)
    predictor = _predictor_of(model)
    assert _predictor_of(model) is predictor
    np.testing.assert_allclose(predictor(x)["logits"], model.predict_on_batch(x)["logits"], atol=1e-5)
    alive = weakref.ref(model)
    del model, predictor
    gc.collect()
    assert alive() is None


@pytest.mark.slow
def test_training_on_cut_batches_matches_fixed_length_training_without_dropout():
    from bertlayers.training.optimization import create_optimizer

    x, _ = examples(64, seed=2)
    y = np.arange(64) % 2

    def trained(data):
        import keras

        keras.utils.set_random_seed(0)
        encoder = BertEncoder(**TINY, dropout=0.0, attention_dropout=0.0)
        model = SequenceClassifier(encoder, 2, dropout=0.0)
        model.compile(optimizer=create_optimizer(1e-3, 16, 2))
        if data is None:
            model.fit(x, {"logits": y}, batch_size=8, epochs=2, shuffle=False, verbose=0)
        else:
            model.fit(data, epochs=2, verbose=0)
        return model.get_weights()

    # length_batches sorts by length: train the fixed-length model on that order too.
    order = np.argsort(x["padding_mask"].sum(axis=1), kind="stable")
    x, y = {k: v[order] for k, v in x.items()}, y[order]
    fixed = trained(None)
    cut = trained(length_batches(x, {"logits": y}, batch_size=8))
    for a, b in zip(fixed, cut):
        np.testing.assert_allclose(a, b, atol=2e-6)  # the same arithmetic: only rounding differs
