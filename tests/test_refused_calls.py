"""A refused call leaves every model the library builds as it was, under every backend.

Each model class is trained a step, then fed bad batches of every kind through every entry point
(`predict`, `fit`, `evaluate`, `*_on_batch`, a direct call): each is refused by name, and the model
then answers exactly as before, trains and saves. Under JAX, Keras's own loops clear the variables
while a step runs: before the guard a refused `predict` left them empty for good (`make test` runs
this file under both backends). Also: the guard's second line (a step that fails inside the
compiled function still gives the variables back), left padding, and atomic `save`.
"""

import keras
import numpy as np
import pytest

from bertlayers.families.albert import AlbertEncoder
from bertlayers.families.bert import BertEncoder
from bertlayers.families.electra import ElectraPretrainer, electra_encoders
from bertlayers.families.spanbert import SpanBertPretrainer
from bertlayers.families.xlnet import XLNetEncoder, XLNetPretrainer
from bertlayers.models import (
    BertPretrainer,
    CausalLMPretrainer,
    Distiller,
    DualEncoder,
    MultipleChoice,
    MultiTask,
    SentenceEmbedder,
    SequenceClassifier,
    SpanPredictor,
    Task,
    TokenClassifier,
    compiled_predictor,
)
from bertlayers.networks import EncoderConfig
from bertlayers.networks.guarded_model import GuardedModel

TINY = dict(vocabulary_size=50, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=16)
B, S, P, V = 4, 8, 2, TINY["vocabulary_size"]


def encoder_batch(prefix="", shape=(B, S), seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones(shape, "int32")
    mask[1, ..., 6:] = 0
    ids = rng.integers(5, V, shape).astype("int32") * mask
    return {prefix + "token_ids": ids, prefix + "segment_ids": np.zeros(shape, "int32"), prefix + "padding_mask": mask}


def _cases():
    """name: (build() -> model, inputs, targets, encoder input prefixes, reads its first token)."""
    rng = np.random.default_rng(1)
    base = encoder_batch()
    positions = np.tile(np.arange(1, P + 1, dtype="int32"), (B, 1))
    lm = rng.integers(5, V, (B, P)).astype("int32")
    labels = rng.integers(0, 2, B)
    config = EncoderConfig(**TINY)
    xlnet_config = config.replace(architecture="xlnet", type_vocab_size=3)
    perm = np.triu(np.ones((S, S), "float32"), 1)[None].repeat(B, 0)
    target_mapping = np.eye(P, S, 1, dtype="float32")[None].repeat(B, 0)
    pair = {**encoder_batch("query_"), **encoder_batch("passage_", seed=2)}
    return {
        "bert_encoder": (lambda: BertEncoder(**TINY), base, None, [""], True),
        "albert_encoder": (lambda: AlbertEncoder(embedding_size=8, **TINY), base, None, [""], True),
        "xlnet_encoder": (lambda: XLNetEncoder.from_encoder_config(xlnet_config), base, None, [""], False),
        "classifier": (lambda: SequenceClassifier(BertEncoder(**TINY), 2), base, labels, [""], True),
        "mean_pooled_classifier": (
            lambda: SequenceClassifier(BertEncoder(**TINY), 2, pooling="mean"),
            base,
            labels,
            [""],
            True,
        ),
        "tagger": (lambda: TokenClassifier(BertEncoder(**TINY), 3), base, rng.integers(0, 3, (B, S)), [""], True),
        "crf_tagger": (
            lambda: TokenClassifier(BertEncoder(**TINY), 3, crf=True),
            base,
            {"tags": rng.integers(0, 3, (B, S))},
            [""],
            True,
        ),
        "span_predictor": (
            lambda: SpanPredictor(BertEncoder(**TINY)),
            {**base, "span_mask": base["padding_mask"]},
            {"start_logits": labels, "end_logits": labels},
            [""],
            True,
        ),
        "multiple_choice": (
            lambda: MultipleChoice(BertEncoder(**TINY)),
            encoder_batch(shape=(B, 3, S)),
            rng.integers(0, 3, B),
            [""],
            True,
        ),
        "sentence_embedder": (lambda: SentenceEmbedder(BertEncoder(**TINY)), base, None, [""], True),
        "dual_encoder": (lambda: DualEncoder(BertEncoder(**TINY)), pair, None, ["query_", "passage_"], True),
        "multi_task": (
            lambda: MultiTask(BertEncoder(**TINY), {"a": Task("classification", 2), "t": Task("tagging", 3)}),
            base,
            {"a": labels, "t": rng.integers(0, 3, (B, S))},
            [""],
            True,
        ),
        "bert_pretrainer": (
            lambda: BertPretrainer(BertEncoder(**TINY)),
            {**base, "masked_positions": positions},
            {"mlm": lm, "nsp": labels},
            [""],
            True,
        ),
        "causal_pretrainer": (
            lambda: CausalLMPretrainer(BertEncoder(**TINY, causal=True)),
            base,
            {"lm": np.roll(base["token_ids"], -1, axis=1)},
            [""],
            False,
        ),
        "electra": (
            lambda: ElectraPretrainer(*electra_encoders(config, 0.5)),
            {
                **base,
                "masked_positions": positions,
                "masked_lm_ids": lm,
                "masked_lm_weights": np.ones((B, P), "float32"),
                "sample_seed": np.tile([[3, 4]], (B, 1)).astype("int32"),
            },
            None,
            [""],
            True,
        ),
        "spanbert": (
            lambda: SpanBertPretrainer(BertEncoder(**TINY)),
            {
                **base,
                "masked_positions": positions,
                "span_left_positions": positions - 1,
                "span_right_positions": positions + 1,
                "span_offsets": np.ones((B, P), "int32"),
            },
            {"mlm": lm, "sbo": lm},
            [""],
            True,
        ),
        "xlnet_pretrainer": (
            lambda: XLNetPretrainer(XLNetEncoder.from_encoder_config(xlnet_config)),
            {**base, "perm_mask": perm, "target_mapping": target_mapping},
            {"plm": lm},
            [""],
            False,
        ),
        "distiller": (
            lambda: Distiller(SequenceClassifier(BertEncoder(**TINY), 2)),
            base,
            {"teacher_logits": rng.normal(size=(B, 2)).astype("float32")},
            [""],
            True,
        ),
    }


CASES = _cases()
TRAINED = [  # the others have no loss
    name for name in CASES if name not in ("bert_encoder", "albert_encoder", "xlnet_encoder", "sentence_embedder")
]


def bad_batches(x, prefixes, reads_first_token):
    """(what, batch, error, message) for each kind of bad input to the encoder inputs of `x`."""

    def changed(name, value):
        return {**x, prefixes[0] + name: value}

    ids, mask = x[prefixes[0] + "token_ids"], x[prefixes[0] + "padding_mask"]
    negative, past, two, left = ids.copy(), ids.copy(), mask.copy(), mask.copy()
    negative[(0,) * ids.ndim] = -1
    past[(0,) * ids.ndim] = V
    two[(0,) * ids.ndim] = 2
    left[(0,) * (mask.ndim - 1)] = [0] + [1] * (mask.shape[-1] - 1)
    batches = [
        ("float ids", changed("token_ids", ids.astype("float32") + 0.7), TypeError, "token_ids must be an integer"),
        ("an extra axis", changed("token_ids", ids[..., None]), ValueError, "token_ids must have rank"),
        (
            "rank 4",
            {k: (v[..., None, None] if k.endswith(("_ids", "mask")) else v) for k, v in x.items()},
            ValueError,
            "must have rank",
        ),
        ("id -1", changed("token_ids", negative), ValueError, "token_ids holds -1, outside"),
        ("id past the vocabulary", changed("token_ids", past), ValueError, f"token_ids holds {V}, outside"),
        ("mask of 2", changed("padding_mask", two), ValueError, "padding_mask holds 2"),
        ("shapes disagree", changed("segment_ids", x[prefixes[0] + "segment_ids"][..., :-1]), ValueError, "same shape"),
    ]
    if reads_first_token:
        batches.append(("left padding", changed("padding_mask", left), ValueError, "left padding"))
    return batches


def outputs_of(model, x):
    return keras.tree.map_structure(np.asarray, model.predict_on_batch(x))


def assert_same(a, b):
    keras.tree.map_structure(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6), a, b)


# Under JAX: the base classifier, each class with its own loss (CRF, dual encoder's two input
# sets, ELECTRA, the distiller), rank-3 inputs, a model reading its last token, one without a loss;
# the rest are the same guard over other heads.
JAX_CASES = ("classifier", "crf_tagger", "dual_encoder", "electra", "distiller", "multiple_choice", "xlnet_pretrainer")


@pytest.mark.slow(reason="each model trains, refuses 48 bad calls, trains again, saves and reloads")
@pytest.mark.other_backend_cases(*JAX_CASES, "bert_encoder")
@pytest.mark.parametrize("name", list(CASES))
def test_refused_calls_of_every_kind_leave_the_model_trainable_and_savable(name, tmp_path):
    build, x, y, prefixes, reads_first_token = CASES[name]
    keras.utils.set_random_seed(0)
    model = build()
    trains = name in TRAINED
    if trains:
        model.compile(optimizer="adam")
        # `fit`'s step runs the model with `training=True` (dropout on): the loss of its one batch,
        # taken before the update, is not `evaluate`'s on the same weights and batch. Keras decides
        # from the model's `call` signature; when the guard's `call` did not name `training`, every
        # model trained with dropout off.
        evaluated = np.ravel(model.test_on_batch(x, y))[0]
        trained = model.fit(x, y, batch_size=B, epochs=1, verbose=0).history["loss"][0]
        # (Without dropout the two agree to float32 rounding, ~1e-7 of the loss; ELECTRA's untrained loss,
        # 50 times a near-uniform RTD loss, moves least: 8e-6 of itself.)
        assert np.isfinite(trained) and abs(trained - evaluated) > 1e-6 * abs(evaluated), (trained, evaluated)
    before = outputs_of(model, x)
    for what, batch, error, message in bad_batches(x, prefixes, reads_first_token):
        calls = {
            "predict": lambda batch=batch: model.predict(batch, verbose=0),
            "predict_on_batch": lambda batch=batch: model.predict_on_batch(batch),
            "call": lambda batch=batch: model(batch, training=False),
        }
        if trains:
            calls.update(
                fit=lambda batch=batch: model.fit(batch, y, verbose=0),
                evaluate=lambda batch=batch: model.evaluate(batch, y, verbose=0),
                train_on_batch=lambda batch=batch: model.train_on_batch(batch, y),
            )
        for call, run in calls.items():
            with pytest.raises(error, match=message):
                run()
                pytest.fail(f"{what} through {call} was not refused")
    assert_same(outputs_of(model, x), before)  # refused, and nothing moved
    if name != "distiller":  # called directly too, after the refused direct calls (it once failed on its shapes)
        assert_same(keras.tree.map_structure(np.asarray, model(x, training=False)), before)
    assert len(model.get_weights()) == len(model.weights)
    if trains:
        start = [np.array(w) for w in model.trainable_weights]
        model.fit(x, y, batch_size=B, epochs=1, verbose=0)
        assert any(not np.array_equal(a, np.array(w)) for a, w in zip(start, model.trainable_weights))
    path = str(tmp_path / "model.keras")
    model.save(path)
    if name != "distiller":  # a training wrapper: its student is what is kept
        assert_same(outputs_of(keras.saving.load_model(path), x), outputs_of(model, x))


@pytest.mark.slow
def test_a_step_that_fails_inside_the_compiled_function_gives_the_variables_back(monkeypatch):
    """The second guard: with the host checks off, the bad batch fails while the step is traced (or,
    mid-epoch, at its third batch); the model keeps the weights of the last step that ran."""
    model = SequenceClassifier(BertEncoder(**TINY), 2)
    model.compile(optimizer="adam")
    x, y = encoder_batch(), np.array([0, 1, 0, 1])
    model.fit(x, y, verbose=0)
    monkeypatch.setattr(GuardedModel, "check_inputs", lambda self, data: None)
    floats = {k: v.astype("float32") for k, v in x.items()}
    for run in (
        lambda: model.predict(floats, verbose=0),
        lambda: model.fit(floats, y, verbose=0),
        lambda: model.evaluate(floats, y, verbose=0),
    ):
        with pytest.raises(TypeError, match="must be an integer"):
            run()
        assert np.isfinite(model.predict(x, verbose=0)["logits"]).all()

    def batches():  # two good steps, then one the model refuses (a new shape: traced anew under JAX)
        for step in range(3):
            yield ({k: v[..., None] for k, v in x.items()} if step == 2 else x), y

    start = [np.array(w) for w in model.trainable_weights]
    with pytest.raises(Exception, match="rank|shape"):  # TensorFlow's generator refuses the shape itself
        model.fit(batches(), steps_per_epoch=3, verbose=0)
    after_two = [np.array(w) for w in model.trainable_weights]
    assert any(not np.array_equal(a, b) for a, b in zip(start, after_two))  # the two steps' training kept
    model.fit(x, y, verbose=0)


def test_left_padding_is_refused_where_the_first_token_is_read_and_kept_where_the_last_is():
    x = encoder_batch()
    left = x["padding_mask"].copy()
    left[0] = [0, 0, 1, 1, 1, 1, 1, 1]
    with pytest.raises(ValueError, match="padding_mask row 0 starts with padding"):
        BertEncoder(**TINY)({**x, "padding_mask": left})
    xlnet = XLNetEncoder.from_encoder_config(EncoderConfig(**TINY).replace(architecture="xlnet", type_vocab_size=3))
    assert np.isfinite(np.asarray(xlnet({**x, "padding_mask": left})["pooled_output"])).all()
    # Right padding is read as before.
    assert np.isfinite(np.asarray(BertEncoder(**TINY)(x)["pooled_output"])).all()


def test_save_keeps_the_old_file_when_saving_fails(tmp_path, monkeypatch):
    model = SequenceClassifier(BertEncoder(**TINY), 2)
    path = str(tmp_path / "model.keras")
    model.save(path)
    good = open(path, "rb").read()

    def broken(self, filepath, *args, **kwargs):  # half an archive, then the failure
        if hasattr(filepath, "write"):
            filepath.write(b"PK\x03\x04 half")
        else:
            with open(filepath, "wb") as file:
                file.write(b"PK\x03\x04 half")
        raise RuntimeError("the archive could not be written")

    monkeypatch.setattr(keras.Model, "save", broken)
    with pytest.raises(RuntimeError, match="could not be written"):
        model.save(path)
    assert open(path, "rb").read() == good


def test_the_compiled_predictor_checks_a_batch_before_compiling_it():
    model = SequenceClassifier(BertEncoder(**TINY), 2)
    predict = compiled_predictor(model)
    x = encoder_batch()
    expected = predict(x)["logits"]
    for batch, message in (
        (dict(x, token_ids=x["token_ids"].astype("float32")), "must be an integer"),
        (dict(x, token_ids=-x["token_ids"]), "outside"),
        (dict(x, padding_mask=x["padding_mask"] * 2), "padding_mask holds 2"),
        (
            dict(x, padding_mask=np.concatenate([x["padding_mask"][:, :1] * 0, x["padding_mask"][:, 1:]], 1)),
            "row 0 starts",
        ),
        (dict(x, padding_mask=x["padding_mask"] * (np.arange(len(x["token_ids"]))[:, None] != 1)), "row 1 has no real"),
    ):  # the same shapes as the batch that compiled: values are checked at every call
        with pytest.raises((TypeError, ValueError), match=message):
            predict(batch)
    np.testing.assert_allclose(predict(x)["logits"], expected, rtol=1e-6)


@pytest.mark.parametrize("real_first", [True, False])
def test_the_compiled_value_check_accepts_what_the_host_check_accepts(real_first):
    """`values_within` (a compiled predictor's check) is True exactly where `check_encoder_values`
    (the host's) raises nothing, for good inputs and each kind of bad value."""
    from bertlayers.layers.input_checks import EncoderInputLimits, check_encoder_values, values_within

    limits = EncoderInputLimits(50, 2, 16, real_first)
    good = {
        "token_ids": np.array([[2, 7, 9, 0], [2, 49, 0, 0]], "int32"),
        "segment_ids": np.array([[0, 0, 1, 0], [0, 1, 0, 0]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "int32"),
    }
    cases = [good]
    for name, row, column, value in (
        ("token_ids", 1, 1, 50),
        ("token_ids", 0, 2, -1),
        ("segment_ids", 0, 2, 2),
        ("padding_mask", 0, 3, 2),
        ("padding_mask", 1, 0, 0),  # left padding: refused only where the summary is read first
    ):
        bad = {key: value_.copy() for key, value_ in good.items()}
        bad[name][row, column] = value
        cases.append(bad)
    cases.append(dict(good, padding_mask=np.array([[1, 1, 1, 0], [0, 0, 0, 0]], "int32")))  # an empty row
    for case in cases:
        try:
            check_encoder_values(case, *limits)
            accepted = True
        except ValueError:
            accepted = False
        assert bool(keras.ops.convert_to_numpy(values_within(case, [limits]))) == accepted, case
