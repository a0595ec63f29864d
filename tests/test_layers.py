"""Every layer through the shared helper, plus each layer's own semantics."""

import keras
import numpy as np
import pytest
from keras import ops

from bertlayers import layers
from bertlayers.families import electra, spanbert, xlnet
from bertlayers.testing import run_layer_test

BATCH, SEQ, HIDDEN, HEADS, VOCAB = 2, 6, 16, 4, 50
rng = np.random.default_rng(0)


def hidden_states(batch=BATCH, seq=SEQ, width=HIDDEN):
    return rng.normal(size=(batch, seq, width)).astype("float32")


def token_ids(batch=BATCH, seq=SEQ):
    return rng.integers(1, VOCAB, size=(batch, seq)).astype("int32")


PADDING = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], "int32")


# --- The shared helper on every layer ---------------------------------------------------


def test_position_embedding():
    run_layer_test(
        layers.PositionEmbedding, {"max_sequence_length": 8}, {"inputs": hidden_states()}, (BATCH, SEQ, HIDDEN)
    )


def test_bert_embeddings():
    run_layer_test(
        layers.BertEmbeddings,
        {"vocabulary_size": VOCAB, "embedding_size": HIDDEN, "max_sequence_length": 8, "dropout": 0.1},
        {"token_ids": token_ids(), "segment_ids": PADDING},
        (BATCH, SEQ, HIDDEN),
    )


def test_embeddings_without_learned_positions():
    """Token (+ segment) then the norm: positions enter through attention (rotary models); a
    sequence longer than max_sequence_length is still refused by name."""
    run_layer_test(
        layers.BertEmbeddings,
        {
            "vocabulary_size": VOCAB,
            "embedding_size": HIDDEN,
            "max_sequence_length": 8,
            "type_vocab_size": 0,
            "learned_positions": False,
            "normalization": "bertlayers>BiasFreeLayerNorm",
        },
        {"token_ids": token_ids()},
        (BATCH, SEQ, HIDDEN),
    )
    embeddings = layers.BertEmbeddings(
        vocabulary_size=VOCAB, embedding_size=HIDDEN, max_sequence_length=4, learned_positions=False, dropout=0.0
    )
    ids = token_ids()
    out = ops.convert_to_numpy(embeddings(ids[:, :4]))
    table = ops.convert_to_numpy(embeddings.token_embedding.embeddings)
    segments = ops.convert_to_numpy(embeddings.segment_embedding.embeddings)
    x = table[ids[:, :4]] + segments[0]
    np.testing.assert_allclose(
        out, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12), atol=1e-4
    )
    with pytest.raises(ValueError, match="longer than the maximum 4"):
        embeddings(ids)


def test_factorized_embedding():
    run_layer_test(
        layers.FactorizedEmbedding,
        {"vocabulary_size": VOCAB, "embedding_size": 8, "hidden_size": HIDDEN, "max_sequence_length": 8},
        {"token_ids": token_ids(), "segment_ids": PADDING},
        (BATCH, SEQ, HIDDEN),
    )


def test_multi_head_attention():
    run_layer_test(
        layers.MultiHeadAttention,
        {"num_heads": HEADS, "key_dim": HIDDEN // HEADS, "dropout": 0.1},
        {"query": hidden_states(), "attention_mask": PADDING[:, None, :]},
        (BATCH, SEQ, HIDDEN),
    )


def test_grouped_query_attention_equals_attention_with_the_key_heads_repeated():
    """GQA (2 key/value heads for 4 query heads): query head h reads key/value head h // 2, so it
    equals full multi-head attention whose key and value kernels repeat each shared head."""
    run_layer_test(
        layers.RotaryAttention,
        {"num_heads": HEADS, "key_dim": HIDDEN // HEADS, "num_key_value_heads": 2, "rotary_theta": 100.0},
        {"query": hidden_states(), "attention_mask": PADDING[:, None, :]},
        (BATCH, SEQ, HIDDEN),
    )
    x = hidden_states()
    grouped = layers.MultiHeadAttention(HEADS, HIDDEN // HEADS, num_key_value_heads=2)
    expected_out = grouped(x, attention_mask=PADDING[:, None, :])
    full = layers.MultiHeadAttention(HEADS, HIDDEN // HEADS)
    full(x)
    for name in ("query_dense", "output_dense"):
        for ours, theirs in zip(getattr(full, name).weights, getattr(grouped, name).weights):
            ours.assign(theirs)
    for name in ("key_dense", "value_dense"):
        kernel, bias = (ops.convert_to_numpy(w) for w in getattr(grouped, name).weights)
        getattr(full, name).weights[0].assign(np.repeat(kernel, 2, axis=1))
        getattr(full, name).weights[1].assign(np.repeat(bias, 2, axis=0))
    np.testing.assert_allclose(full(x, attention_mask=PADDING[:, None, :]), expected_out, atol=1e-5)
    with pytest.raises(ValueError, match="must divide num_heads"):
        layers.MultiHeadAttention(HEADS, 4, num_key_value_heads=3)


def test_rotary_attention():
    run_layer_test(
        layers.RotaryAttention,
        {"num_heads": HEADS, "key_dim": HIDDEN // HEADS, "rotary_theta": 500.0, "dropout": 0.1},
        {"query": hidden_states(), "attention_mask": PADDING[:, None, :]},
        (BATCH, SEQ, HIDDEN),
    )


def _rotate_half(x):  # transformers' rotate_half: [a, b] -> [-b, a]
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def test_rotary_attention_follows_the_definition_and_sees_relative_positions():
    """Against transformers' `apply_rotary_pos_emb` written out in NumPy (cos and sin of [f, f],
    q·cos + rotate_half(q)·sin), with the layer's own projections; and the rows computed alone,
    told where they sit, equal the full computation's."""
    theta, head = 500.0, HIDDEN // HEADS
    attention = layers.RotaryAttention(HEADS, head, rotary_theta=theta)
    x = 3 * hidden_states()
    mask = PADDING[:, None, :]
    got = ops.convert_to_numpy(attention(x, attention_mask=mask))

    def project(dense, inputs):  # [B, T, H] -> [B, T, N, D]
        return np.einsum("btd,dnh->btnh", inputs, ops.convert_to_numpy(dense.kernel)) + ops.convert_to_numpy(dense.bias)

    frequencies = 1.0 / theta ** (np.arange(0, head, 2) / head)  # [D/2]
    angles = np.arange(SEQ)[:, None] * frequencies  # [S, D/2]
    cos, sin = (np.concatenate([f(angles)] * 2, axis=-1)[None, :, None, :] for f in (np.cos, np.sin))  # [1, S, 1, D]
    q, k, v = (project(d, x) for d in (attention.query_dense, attention.key_dense, attention.value_dense))
    q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    scores = np.einsum("bqnh,bknh->bnqk", q, k) / np.sqrt(head)
    scores = np.where(mask[:, None].astype(bool), scores, -1e9)
    probabilities = np.exp(scores - scores.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    context = np.einsum("bnqk,bknh->bqnh", probabilities, v)
    expected = np.einsum("btnh,nhd->btd", context, ops.convert_to_numpy(attention.output_dense.kernel))
    expected += ops.convert_to_numpy(attention.output_dense.bias)
    np.testing.assert_allclose(got, expected, atol=2e-4 * np.abs(expected).max())

    rows = np.array([[5, 2], [3, 0]], "int32")
    alone = ops.convert_to_numpy(
        attention(np.take_along_axis(x, rows[..., None], 1), x, attention_mask=mask, query_positions=rows)
    )
    np.testing.assert_allclose(alone, np.take_along_axis(got, rows[..., None], 1), atol=2e-4 * np.abs(got).max())
    with pytest.raises(ValueError, match="key_dim must be even, got 3"):
        layers.RotaryAttention(2, 3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_block(norm_first):
    run_layer_test(
        layers.TransformerEncoderBlock,
        {"num_heads": HEADS, "intermediate_size": 32, "norm_first": norm_first},
        {"inputs": hidden_states(), "padding_mask": PADDING},
        (BATCH, SEQ, HIDDEN),
    )


def test_block_without_the_norm_before_attention():
    """ModernBERT's first layer: attention reads x itself (its embeddings end in a norm); the
    feed-forward half keeps its norm. Refused in a post-norm block, which has no such norm."""
    run_layer_test(
        layers.TransformerEncoderBlock,
        {"num_heads": HEADS, "intermediate_size": 32, "norm_first": True, "normalize_attention_input": False},
        {"inputs": hidden_states(), "padding_mask": PADDING},
        (BATCH, SEQ, HIDDEN),
    )
    x = hidden_states()
    block = layers.TransformerEncoderBlock(HEADS, 32, dropout=0.0, norm_first=True, normalize_attention_input=False)
    out = ops.convert_to_numpy(block(x))
    assert block.attention_layer_norm is None
    attended = x + ops.convert_to_numpy(block.attention_layer(x, x))
    feed_forward = block.output_dense(block._activation_fn(block.intermediate_dense(block.output_layer_norm(attended))))
    np.testing.assert_allclose(out, attended + ops.convert_to_numpy(feed_forward), atol=1e-5)
    with pytest.raises(ValueError, match="only a pre-norm block"):
        layers.TransformerEncoderBlock(HEADS, 32, normalize_attention_input=False)


def test_transformer_encoder_block_attention_mask_and_scores():
    causal = np.tril(np.ones((SEQ, SEQ), "int32"))[None].repeat(BATCH, 0)
    run_layer_test(
        layers.TransformerEncoderBlock,
        {"num_heads": HEADS, "intermediate_size": 32, "activation": "gelu_approximate"},
        {
            "inputs": hidden_states(),
            "padding_mask": PADDING,
            "attention_mask": causal,
        },
        ((BATCH, SEQ, HIDDEN), (BATCH, HEADS, SEQ, SEQ)),
        call_kwargs={"return_attention_scores": True},
    )


def test_masked_lm_head_tied():
    embedding = keras.layers.ReversibleEmbedding(VOCAB, 8)
    run_layer_test(
        layers.MaskedLMHead,
        {"token_embedding": embedding},
        {"sequence": hidden_states(), "masked_positions": np.array([[1, 4, 0], [2, 3, 0]], "int32")},
        (BATCH, 3, VOCAB),
        mixed_output_dtype="float32",
    )


def test_masked_lm_head_untied():
    run_layer_test(
        layers.MaskedLMHead,
        {"vocabulary_size": VOCAB},
        {"sequence": hidden_states(), "masked_positions": np.array([[1, 4], [2, 3]], "int32")},
        (BATCH, 2, VOCAB),
        mixed_output_dtype="float32",
    )


def test_pooler():
    run_layer_test(layers.Pooler, {}, {"sequence": hidden_states()}, (BATCH, HIDDEN))


def test_mean_pooler_with_a_norm_and_no_bias():
    """ModernBERT's classifier head: Norm(act(W · mean of the real tokens)), against NumPy."""
    run_layer_test(
        layers.Pooler,
        {"position": "mean", "use_bias": False, "normalization": "bertlayers>BiasFreeLayerNorm", "activation": "gelu"},
        {"sequence": hidden_states(), "padding_mask": PADDING},
        (BATCH, HIDDEN),
    )
    sequence = hidden_states()
    pooler = layers.Pooler(position="mean", use_bias=False, normalization="bertlayers>BiasFreeLayerNorm")
    pooled = ops.convert_to_numpy(pooler(sequence, PADDING))
    assert len(pooler.weights) == 2  # W and γ: no bias, no β
    real = PADDING[:, :, None].astype("float32")
    mean = (sequence * real).sum(1) / real.sum(1)
    hidden = np.tanh(mean @ ops.convert_to_numpy(pooler.dense.kernel))
    centered = hidden - hidden.mean(-1, keepdims=True)
    expected = centered / np.sqrt(centered.var(-1, keepdims=True) + 1e-12) * ops.convert_to_numpy(pooler.norm.gamma)
    np.testing.assert_allclose(pooled, expected, atol=1e-4)


def test_late_pooler_is_the_mean_of_each_tokens_activation():
    """EuroBERT's late pooling: act(W · x_t + b) at each real token, then their mean."""
    sequence = hidden_states()
    pooler = layers.Pooler(position="late", activation="gelu")
    pooled = ops.convert_to_numpy(pooler(sequence, PADDING))
    per_token = ops.convert_to_numpy(pooler._activation_fn(pooler.dense(sequence)))
    real = PADDING[:, :, None].astype("float32")
    np.testing.assert_allclose(pooled, (per_token * real).sum(1) / real.sum(1), atol=1e-5)


def test_bias_free_layer_norm():
    run_layer_test(layers.BiasFreeLayerNorm, {"epsilon": 1e-5}, {"inputs": hidden_states()}, (BATCH, SEQ, HIDDEN))
    norm = layers.BiasFreeLayerNorm(epsilon=1e-5)
    x = hidden_states()
    y = ops.convert_to_numpy(norm(x))
    assert [w.name for w in norm.weights] == ["gamma"]
    np.testing.assert_allclose(y, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), atol=1e-5)


@pytest.mark.parametrize("mode", ["mean", "first", "max", "last", "weighted_mean", "mean_sqrt_len"])
def test_sequence_pooling(mode):
    run_layer_test(
        layers.SequencePooling,
        {"mode": mode, "normalize": mode == "mean"},
        {"sequence": hidden_states(), "padding_mask": PADDING},
        (BATCH, HIDDEN),
        trainable=False,
    )


def test_unit_length():
    run_layer_test(layers.UnitLength, {}, {"vectors": hidden_states()[:, 0]}, (BATCH, HIDDEN), trainable=False)


def test_unit_length_trains_through_a_zero_row():
    """A zero vector (a padding row's) passes a finite gradient; the norm's own there is 0/0, a NaN
    that a mask multiplying the row by 0 keeps (under JAX it trained a multi-vector model to NaN)."""
    inputs = keras.Input((3, 4))
    model = keras.Model(inputs, layers.UnitLength()(keras.layers.Dense(4, use_bias=False)(inputs)))
    model.compile(keras.optimizers.SGD(0.1), "mse")
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    x[:, 2] = 0.0  # the padding rows: zero in, zero out, zero wanted
    model.fit(x, np.where(x != 0, 0.5, 0.0), epochs=1, verbose=0)
    assert all(np.isfinite(np.asarray(w)).all() for w in model.weights)


@pytest.mark.parametrize("pooling, activation", [("max", "relu"), ("sum", "log1p_relu")])
def test_splade_pooling(pooling, activation):
    """The shared layer test, and the definition: log(1 + ReLU) (twice for log1p_relu) of every
    real token's logits, pooled over the real tokens; the FLOPS regularizer by its formula."""
    logits = hidden_states(width=VOCAB)
    layer, pooled = run_layer_test(
        layers.SpladePooling,
        {"pooling": pooling, "activation": activation},
        {"logits": logits, "padding_mask": PADDING},
        (BATCH, VOCAB),
        trainable=False,
    )
    weights = np.log1p(np.maximum(logits, 0))
    if activation == "log1p_relu":
        weights = np.log1p(weights)
    weights = weights * (PADDING != 0)[:, :, None]
    expected = weights.max(axis=1) if pooling == "max" else weights.sum(axis=1)
    np.testing.assert_allclose(
        np.asarray(layers.SpladePooling(pooling, activation)(logits, PADDING)), expected, rtol=1e-5
    )
    flops = float(np.asarray(layers.flops_regularizer(expected)))
    np.testing.assert_allclose(flops, np.sum(np.mean(expected, axis=0) ** 2), rtol=1e-5)


@pytest.mark.parametrize("attend", [False, True])
def test_query_expansion(attend):
    """ColBERT's queries: padded to the length, the padding turned into the expansion token,
    every row computed, the keys the real tokens' (or every token's, attended)."""
    ids = np.array([[2, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0]], "int32")
    real = (ids != 0).astype("int32")
    _, out = run_layer_test(
        layers.QueryExpansion,
        {"token_id": 4, "length": 8, "attend": attend},
        {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": real},
        {
            "token_ids": (BATCH, 8),
            "segment_ids": (BATCH, 8),
            "padding_mask": (BATCH, 8),
            "attention_mask": (BATCH, 1, 8),
        },
        trainable=False,
    )
    padded = np.pad(ids, [(0, 0), (0, 2)])
    np.testing.assert_array_equal(out["token_ids"], np.where(padded != 0, padded, 4))
    np.testing.assert_array_equal(out["padding_mask"], np.ones((BATCH, 8)))
    np.testing.assert_array_equal(out["segment_ids"], np.zeros((BATCH, 8)))
    np.testing.assert_array_equal(out["attention_mask"][:, 0], np.ones((BATCH, 8)) if attend else padded != 0)


def test_scored_tokens():
    """The computed tokens but those of the skiplist's ids."""
    ids = np.array([[2, 7, 8, 3, 7, 0], [2, 9, 3, 0, 0, 0]], "int32")
    _, mask = run_layer_test(
        layers.ScoredTokens,
        {"skiplist_ids": [7, 3]},
        {"token_ids": ids, "padding_mask": (ids != 0).astype("int32")},
        (BATCH, SEQ),
        trainable=False,
    )
    np.testing.assert_array_equal(mask, [[1, 0, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])


@pytest.mark.parametrize("mean", [False, True])
def test_max_sim_scores(mean):
    """`maxsim` of every query against every document, scaled: the scored tokens alone count."""
    queries, documents = hidden_states(seq=4), hidden_states(batch=3)
    query_mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "int32")
    document_mask = np.array([[1] * 6, [1, 1, 1, 0, 0, 0], [1, 0, 1, 0, 1, 0]], "int32")
    _, scores = run_layer_test(
        layers.MaxSimScores,
        {"scale": 2.0, "mean": mean},
        {"queries": queries, "query_mask": query_mask, "documents": documents, "document_mask": document_mask},
        (BATCH, 3),
        mixed_output_dtype="float32",
        trainable=False,
        symbolic_output_shape=(None, None),
    )
    expected = layers.maxsim(
        [q[m != 0] for q, m in zip(queries, query_mask)], [d[m != 0] for d, m in zip(documents, document_mask)], mean
    )
    np.testing.assert_allclose(scores, 2.0 * expected, rtol=1e-5)


def mixture_of_experts_numpy(layer, x):
    """MixtureOfExperts by its definition, from the layer's weights (NumPy, float64)."""
    import math

    w = {v.path.split("/")[-1]: np.asarray(v, "float64") for v in layer.weights}
    logits = x @ w["router"]
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    out = np.zeros_like(x)
    for t in np.ndindex(x.shape[:-1]):
        top = np.argsort(-p[t])[: layer.experts_per_token]
        weights = p[t][top] / (p[t][top].sum() if layer.normalize_weights else 1.0)
        for e, weight in zip(top, weights):
            inner = gelu(x[t] @ w["inner_kernel"][e] + w["inner_bias"][e])
            out[t] += weight * (inner @ w["outer_kernel"][e] + w["outer_bias"][e])
    if layer.shared is not None:
        inner, outer = layer.shared
        hidden = gelu(x @ np.asarray(inner.kernel, "float64") + np.asarray(inner.bias, "float64"))
        out += hidden @ np.asarray(outer.kernel, "float64") + np.asarray(outer.bias, "float64")
    return out


@pytest.mark.parametrize("shared, normalize", [(None, True), (8, False)])
def test_mixture_of_experts(shared, normalize):
    """The shared layer test, and the definition: softmax router, the top 2 of 4 experts a token
    (their weights renormalized or not), each a GELU network, plus a shared expert."""
    config = {"num_experts": 4, "intermediate_size": 12, "experts_per_token": 2}
    config.update(shared_intermediate_size=shared, normalize_weights=normalize, activation="gelu")
    run_layer_test(layers.MixtureOfExperts, config, {"inputs": hidden_states()}, (BATCH, SEQ, HIDDEN))
    layer = layers.MixtureOfExperts(kernel_initializer=keras.initializers.RandomNormal(stddev=0.5, seed=1), **config)
    x = hidden_states()
    np.testing.assert_allclose(np.asarray(layer(x)), mixture_of_experts_numpy(layer, x.astype("float64")), atol=1e-4)
    probabilities, weights = (np.asarray(t) for t in layer.routing(x))
    assert ((weights > 0).sum(-1) == 2).all()
    # Switch's loss: E * sum_e f_e P_e, 1 for uniform routing.
    f = (weights > 0).reshape(-1, 4).mean(0) / 2
    expected = 4 * np.sum(f * probabilities.reshape(-1, 4).mean(0))
    np.testing.assert_allclose(float(layers.load_balancing_loss(probabilities, weights)), expected, rtol=1e-5)


def test_the_load_balancing_loss_spreads_the_tokens():
    """A router sending every token to one expert (a feature every token has weighs for it):
    trained on the load-balancing loss alone (the layer adds it in training), it spreads the 48
    tokens over the 4 experts and the loss falls to its uniform value, 1."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, SEQ, HIDDEN)).astype("float32")
    x[..., 0] = 5.0
    layer = layers.MixtureOfExperts(4, 8, experts_per_token=1, aux_loss_weight=1.0)
    layer(x)
    router = rng.normal(0, 0.3, (HIDDEN, 4)).astype("float32")
    router[0] = [1.0, 0.0, 0.0, 0.0]
    layer.router.assign(router)
    inputs = keras.Input((SEQ, HIDDEN))
    model = keras.Model(inputs, layer(inputs))
    # The task loss is 0: the load-balancing loss the layer adds is all `fit` minimizes.
    model.compile(keras.optimizers.SGD(0.1), loss=lambda y, p: 0.0 * keras.ops.mean(p))

    def load():
        return np.bincount(np.argmax(np.asarray(layer.routing(x)[1]), -1).ravel(), minlength=4)

    assert list(load()) == [48, 0, 0, 0]
    history = model.fit(x, np.zeros_like(x), epochs=40, batch_size=8, verbose=0)
    assert load().max() <= 16 and history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def unit_rows(rows):
    return rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)


def test_sequence_pooling_reads_real_tokens_only():
    sequence = hidden_states()
    sequence[1, 4:] = 1e6  # padding states that would dominate any pooling that read them
    real = [sequence[0], sequence[1, :4]]
    # sentence-transformers' definitions (its Pooling module), the i-th real token weighing i.
    weighted = [(r * np.arange(1, len(r) + 1)[:, None]).sum(0) / np.arange(1, len(r) + 1).sum() for r in real]
    cases = (
        ("mean", [r.mean(0) for r in real]),
        ("max", [r.max(0) for r in real]),
        ("first", [r[0] for r in real]),
        ("last", [r[-1] for r in real]),
        ("weighted_mean", weighted),
        ("mean_sqrt_len", [r.sum(0) / np.sqrt(len(r)) for r in real]),
    )
    # The same rows padded on the left (XLNet's layout, a decoder's): the same vectors.
    left = np.zeros_like(sequence) + 1e6
    left[0], left[1, SEQ - 4 :] = sequence[0], sequence[1, :4]
    left_padding = np.asarray(PADDING)[:, ::-1].copy()
    for mode, expected in cases:
        for states, mask in ((sequence, PADDING), (left, left_padding)):
            pooled = np.asarray(layers.SequencePooling(mode)(states, mask))
            np.testing.assert_allclose(pooled, np.stack(expected), rtol=1e-5, atol=1e-5, err_msg=mode)
    unit = np.asarray(layers.SequencePooling("mean", normalize=True)(sequence, PADDING))
    np.testing.assert_allclose(np.linalg.norm(unit, axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(layers.UnitLength()(sequence[:, 0])), unit_rows(sequence[:, 0]), atol=1e-6)
    with pytest.raises(ValueError, match="mode must be one of"):
        layers.SequencePooling("cls")


def test_classification_head():
    run_layer_test(
        layers.ClassificationHead,
        {"num_classes": 3, "inner_dim": 8, "dropout": 0.1},
        {"inputs": hidden_states()[:, 0]},
        (BATCH, 3),
        mixed_output_dtype="float32",
    )


def test_next_sentence_head():
    run_layer_test(
        layers.NextSentenceHead, {}, {"inputs": hidden_states()[:, 0]}, (BATCH, 2), mixed_output_dtype="float32"
    )


def test_span_prediction_head():
    span_mask = np.array([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]], "int32")
    run_layer_test(
        layers.SpanPredictionHead,
        {},
        {"sequence": hidden_states(), "span_mask": span_mask},
        ((BATCH, SEQ), (BATCH, SEQ)),
        mixed_output_dtype="float32",
    )


def test_token_classification_head():
    run_layer_test(
        layers.TokenClassificationHead,
        {"num_classes": 5},
        {"sequence": hidden_states()},
        (BATCH, SEQ, 5),
        mixed_output_dtype="float32",
    )


def test_scalar_mix():
    run_layer_test(layers.ScalarMix, {}, {"layers": [hidden_states() for _ in range(3)]}, (BATCH, SEQ, HIDDEN))


@pytest.mark.parametrize("return_sequences, shape", [(True, (BATCH, SEQ, 6)), (False, (BATCH, 6))])
def test_bidirectional_lstm(return_sequences, shape):
    run_layer_test(
        layers.BidirectionalLSTM,
        {"units": 3, "return_sequences": return_sequences},
        {"sequence": hidden_states(), "padding_mask": PADDING},
        shape,
    )


# --- Semantics ------------------------------------------------------------------------------


def test_attention_ignores_masked_keys():
    attention = layers.MultiHeadAttention(num_heads=HEADS, key_dim=HIDDEN // HEADS)
    x = hidden_states()
    mask = PADDING[:, None, :]
    out, probs = attention(x, attention_mask=mask, return_attention_scores=True)
    probs = ops.convert_to_numpy(probs)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    assert np.all(probs[1, :, :, 4:] == 0.0)
    # Changing what sits at masked key positions changes nothing.
    x2 = x.copy()
    x2[1, 4:] = rng.normal(size=(2, HIDDEN))
    out2 = attention(x2, attention_mask=mask)
    np.testing.assert_allclose(out[1, :4], out2[1, :4], atol=1e-6)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="TensorFlow has one form only: nothing to compare")
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_fused_attention_equals_the_plain_form(policy):
    """Under JAX, attention without probabilities asked for is the backend's fused kernel
    (`ops.dot_product_attention`); with them, the einsums and float32 softmax written out. Both
    give the same output, with a padding mask and with a full [batch, query, key] mask."""
    attention = layers.MultiHeadAttention(num_heads=HEADS, key_dim=HIDDEN // HEADS, dtype=policy)
    x = hidden_states()
    tolerance = 1e-5 if policy == "float32" else 2e-2
    full = np.tril(np.ones((SEQ, SEQ), "int32"))[None] * PADDING[:, None, :]
    for mask in (PADDING[:, None, :], full):
        fused = attention(x, attention_mask=mask)
        plain, _ = attention(x, attention_mask=mask, return_attention_scores=True)
        np.testing.assert_allclose(
            ops.convert_to_numpy(ops.cast(fused, "float32")),
            ops.convert_to_numpy(ops.cast(plain, "float32")),
            atol=tolerance,
        )


def test_fused_attention_gets_a_mask_cudnn_takes():
    """cuDNN's fused kernel refuses a mask broadcast over the queries ([B, 1, 1, K]) and, in
    training, odd query or key lengths (JAX logs a traceback and falls back): the mask reaches it
    at [B, 1, Q, K], equal to the padding mask at every query, and odd lengths in training keep
    the plain form (a classifier's last layer computes the [CLS] query alone)."""
    from bertlayers import backend
    from bertlayers.layers.masking import per_query_attention_mask

    mask = ops.convert_to_numpy(per_query_attention_mask(PADDING[:, None, :], SEQ))
    assert mask.shape == (BATCH, 1, SEQ, SEQ) and mask.dtype == bool
    np.testing.assert_array_equal(mask, np.broadcast_to(PADDING[:, None, None, :] != 0, mask.shape))
    full = np.tril(np.ones((SEQ, SEQ), "int32"))[None] * PADDING[:, None, :]
    np.testing.assert_array_equal(ops.convert_to_numpy(per_query_attention_mask(full, SEQ))[:, 0], full != 0)
    jax = keras.backend.backend() == "jax"
    assert backend.fuses_attention(False, False, training=True, lengths=(8, 8)) == jax
    assert not backend.fuses_attention(False, False, training=True, lengths=(1, 8))
    assert backend.fuses_attention(False, False, training=False, lengths=(1, 7)) == jax
    assert not backend.fuses_attention(True, False) and not backend.fuses_attention(False, True)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_attention_fully_masked_rows_stay_finite_in_half_precision(policy):
    attention = layers.MultiHeadAttention(num_heads=HEADS, key_dim=HIDDEN // HEADS, dtype=policy)
    out, probs = attention(
        hidden_states() * 100.0, attention_mask=np.zeros((BATCH, 1, SEQ), "int32"), return_attention_scores=True
    )
    assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(out, "float32"))))
    assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(probs, "float32"))))


def test_causal_mask_makes_outputs_independent_of_later_tokens():
    block = layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32, dropout=0.0)
    x = hidden_states()
    causal = layers.causal_attention_mask(x)
    assert tuple(causal.shape) == (BATCH, SEQ, SEQ)
    out = block(x, attention_mask=causal)
    x2 = x.copy()
    x2[:, 3:] = rng.normal(size=(BATCH, SEQ - 3, HIDDEN))
    out2 = block(x2, attention_mask=causal)
    np.testing.assert_allclose(out[:, :3], out2[:, :3], atol=1e-5)
    assert not np.allclose(out[:, 3:], out2[:, 3:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_output_positions_compute_the_full_outputs_rows_there(norm_first):
    """`output_positions`: the full output's rows at those positions (keys and values still
    span the sequence), repeated or not, under a padding mask and under a causal mask, with
    the matching attention rows."""
    block = layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32, dropout=0.0, norm_first=norm_first)
    x = hidden_states()
    positions = np.array([[0, 4, 4], [5, 1, 0]], "int32")

    def picked(t):
        return np.take_along_axis(np.asarray(t), positions.reshape(BATCH, 3, *[1] * (np.ndim(t) - 2)), axis=1)

    full = ops.convert_to_numpy(block(x, padding_mask=PADDING))
    rows = ops.convert_to_numpy(block(x, padding_mask=PADDING, output_positions=positions))
    assert rows.shape == (BATCH, 3, HIDDEN)
    np.testing.assert_allclose(rows, picked(full), atol=1e-5)
    causal, causal_scores = block(x, use_causal_mask=True, return_attention_scores=True)
    rows, scores = block(x, use_causal_mask=True, return_attention_scores=True, output_positions=positions)
    np.testing.assert_allclose(rows, picked(causal), atol=1e-5)
    assert tuple(scores.shape) == (BATCH, HEADS, 3, SEQ)
    np.testing.assert_allclose(
        scores, np.take_along_axis(np.asarray(causal_scores), positions[:, None, :, None], axis=2), atol=1e-6
    )


def test_post_and_pre_layer_norm_differ_and_post_ln_output_is_normalized():
    x = hidden_states()
    post = layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32)
    pre = layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32, norm_first=True)
    post_out = ops.convert_to_numpy(post(x))
    pre(x)
    pre.set_weights(post.get_weights())
    pre_out = ops.convert_to_numpy(pre(x))
    # Post-LN ends in a LayerNorm with gamma=1, beta=0: zero mean, unit variance per token.
    np.testing.assert_allclose(post_out.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(post_out.var(-1), 1.0, atol=1e-3)
    assert not np.allclose(post_out, pre_out)


def test_gelu_exact_by_default_and_approximation_selectable():
    block = layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32)
    assert block.activation == "gelu"
    x = np.linspace(-3, 3, 13).astype("float32")
    exact = ops.convert_to_numpy(block._activation_fn(x))
    from math import erf, sqrt

    np.testing.assert_allclose(exact, [0.5 * v * (1 + erf(v / sqrt(2))) for v in x], atol=1e-6)
    approx = layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32, activation="gelu_new")
    assert approx.activation == "gelu_approximate"
    assert not np.allclose(ops.convert_to_numpy(approx._activation_fn(x)), exact, atol=1e-5)
    with pytest.raises(ValueError, match="Unknown activation 'gelu_fast'"):
        layers.TransformerEncoderBlock(num_heads=HEADS, intermediate_size=32, activation="gelu_fast")


@pytest.mark.parametrize("name", ["gelu", "gelu_approximate", "silu"])
def test_training_computes_bfloat16_activations_in_float32_where_the_backend_is_faster_so(name):
    """In training on TensorFlow's CPU, a bfloat16 activation is the float32 function rounded once
    (TensorFlow's bfloat16 element-wise kernels are the slower); in inference, and under JAX, the
    activation is computed in bfloat16 as before (there TensorFlow fuses it into the product)."""
    from bertlayers import backend
    from bertlayers.layers.activations import activate, get_activation

    fn = get_activation(name)
    x = ops.cast(np.linspace(-4, 4, 97).astype("float32"), "bfloat16")
    in_bfloat16 = ops.convert_to_numpy(ops.cast(fn(x), "float32"))
    rounded_once = ops.convert_to_numpy(ops.cast(ops.cast(fn(ops.cast(x, "float32")), "bfloat16"), "float32"))
    assert not np.array_equal(in_bfloat16, rounded_once)  # the two ways differ somewhere
    expected = backend.name() == "tensorflow" and not backend.tensorflow().config.list_logical_devices("GPU")
    assert backend.activations_in_float32() == expected
    trained = ops.convert_to_numpy(ops.cast(activate(fn, x, training=True), "float32"))
    np.testing.assert_array_equal(trained, rounded_once if expected else in_bfloat16)
    for training in (False, None):
        np.testing.assert_array_equal(ops.convert_to_numpy(ops.cast(activate(fn, x, training), "float32")), in_bfloat16)
    assert activate(fn, x, training=True).dtype == x.dtype
    full = np.linspace(-4, 4, 97).astype("float32")  # float32 inputs: the function itself, in training too
    np.testing.assert_array_equal(
        ops.convert_to_numpy(activate(fn, full, training=True)), ops.convert_to_numpy(fn(full))
    )


def test_pluggable_attention_layer_round_trips():
    @keras.saving.register_keras_serializable(package="bertlayers_test")
    class ScaledAttention(layers.MultiHeadAttention):
        pass

    block = layers.TransformerEncoderBlock(
        num_heads=HEADS,
        intermediate_size=32,
        attention_layer=ScaledAttention(num_heads=HEADS, key_dim=HIDDEN // HEADS, name="custom"),
    )
    block(hidden_states())
    assert isinstance(block.attention_layer, ScaledAttention)
    revived = layers.TransformerEncoderBlock.from_config(block.get_config())
    revived(hidden_states())
    assert isinstance(revived.attention_layer, ScaledAttention)


def test_embeddings_reject_bad_inputs():
    embeddings = layers.BertEmbeddings(vocabulary_size=VOCAB, embedding_size=HIDDEN, max_sequence_length=4)
    with pytest.raises(ValueError, match="sequence length 6, longer than the maximum 4"):
        embeddings(token_ids())
    with pytest.raises(TypeError, match="token_ids must be an integer tensor"):
        embeddings(token_ids()[:, :4].astype("float32"))
    with pytest.raises(ValueError, match=r"token_ids must have rank 2 \(\[batch, seq\]\)"):
        embeddings(token_ids()[0, :4])


def test_embeddings_default_segment_is_zero():
    embeddings = layers.BertEmbeddings(vocabulary_size=VOCAB, embedding_size=HIDDEN, dropout=0.0)
    ids = token_ids()
    np.testing.assert_allclose(embeddings(ids), embeddings(ids, np.zeros_like(ids)), atol=1e-6)
    assert not np.allclose(embeddings(ids), embeddings(ids, np.ones_like(ids)))


def test_factorized_embedding_parameter_count():
    vocab, e, h, positions, segments = 1000, 16, 64, 32, 2
    layer = layers.FactorizedEmbedding(
        vocabulary_size=vocab, embedding_size=e, hidden_size=h, max_sequence_length=positions
    )
    layer(token_ids())
    tables = (vocab + segments + positions) * e
    expected = tables + 2 * e + (e * h + h)  # + LayerNorm at E + projection E -> H
    assert layer.count_params() == expected


def test_masked_lm_head_gathers_then_projects_onto_the_tied_embedding():
    embedding = keras.layers.ReversibleEmbedding(VOCAB, HIDDEN)
    head = layers.MaskedLMHead(token_embedding=embedding)
    sequence = hidden_states()
    positions = np.array([[5, 0], [2, 2]], "int32")
    logits = ops.convert_to_numpy(head(sequence, positions))
    # The same computation over every position, then indexed, gives the same logits.
    everywhere = ops.convert_to_numpy(head(sequence, np.tile(np.arange(SEQ, dtype="int32"), (BATCH, 1))))
    np.testing.assert_allclose(logits[0, 0], everywhere[0, 5], atol=1e-5)
    np.testing.assert_allclose(logits[1, 1], everywhere[1, 2], atol=1e-5)
    # Tied: the output projection is the embedding table itself.
    assert not any(w is embedding.embeddings for w in head._trainable_variables)
    embedding.embeddings.assign(embedding.embeddings * 2.0)
    assert not np.allclose(ops.convert_to_numpy(head(sequence, positions)), logits)
    with pytest.raises(ValueError, match="vocabulary_size 7 disagrees"):
        layers.MaskedLMHead(token_embedding=embedding, vocabulary_size=7)


def test_span_head_masks_disallowed_positions():
    head = layers.SpanPredictionHead()
    span_mask = np.array([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]], "int32")
    start, end = head(hidden_states(), span_mask)
    for logits in (ops.convert_to_numpy(start), ops.convert_to_numpy(end)):
        assert np.all(logits[span_mask == 0] <= -1e8)
        assert np.all(np.abs(logits[span_mask == 1]) < 100)
        assert np.all(span_mask[np.arange(BATCH), logits.argmax(-1)] == 1)


def test_bidirectional_lstm_ignores_padding():
    """An example's vectors do not depend on how far its batch is padded, and padding rows are 0."""
    lstm = layers.BidirectionalLSTM(units=5)
    final = layers.BidirectionalLSTM(units=5, return_sequences=False)
    x = hidden_states()
    longer = np.concatenate([x, rng.normal(size=(BATCH, 3, HIDDEN)).astype("float32")], axis=1)
    longer_padding = np.pad(PADDING, [(0, 0), (0, 3)])
    short, long = lstm(x, PADDING), lstm(longer, longer_padding)
    np.testing.assert_allclose(long[:, :SEQ], short, atol=1e-6)
    assert np.all(ops.convert_to_numpy(long)[:, SEQ:] == 0) and np.all(ops.convert_to_numpy(short)[1, 4:] == 0)
    np.testing.assert_allclose(final(longer, longer_padding), final(x, PADDING), atol=1e-6)


def test_scalar_mix_starts_as_the_mean_and_learns_a_weighting():
    mix = layers.ScalarMix()
    stack = [hidden_states() for _ in range(3)]
    np.testing.assert_allclose(mix(stack), np.mean(stack, axis=0), atol=1e-5)
    mix.layer_weights.assign([0.0, 0.0, 50.0])
    mix.gamma.assign(2.0)
    np.testing.assert_allclose(mix(stack), 2.0 * stack[2], atol=1e-4)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_the_position_wise_half_runs_on_real_tokens_only(norm_first):
    """With a padding mask, everything after attention (LayerNorms, feed-forward network,
    residuals) runs on the real tokens' rows alone: each example's rows equal that example run
    alone at its own length, the padding rows are zeros, and the feed-forward network's first
    dense layer is called on exactly the real tokens."""
    block = layers.TransformerEncoderBlock(4, 64, dropout=0.0, attention_dropout=0.0, norm_first=norm_first)
    x = np.random.default_rng(0).normal(size=(3, 7, 32)).astype("float32")
    lengths = np.array([7, 4, 2])
    mask = (np.arange(7)[None, :] < lengths[:, None]).astype("int32")  # [3, 7]
    block(x, padding_mask=mask)  # builds
    seen = []
    dense_call = block.intermediate_dense.call
    block.intermediate_dense.call = lambda rows: seen.append(tuple(rows.shape)) or dense_call(rows)
    out = keras.ops.convert_to_numpy(block(x, padding_mask=mask))
    assert seen == [(int(lengths.sum()), 32)]  # [real tokens, H]: no padding row
    for b, n in enumerate(lengths):
        alone = keras.ops.convert_to_numpy(block(x[b : b + 1, :n], padding_mask=mask[b : b + 1, :n]))
        np.testing.assert_allclose(out[b, :n], alone[0], atol=1e-5)
        assert not out[b, n:].any()


@pytest.mark.tensorflow_only
def test_skipping_padding_compiles_under_xla():
    """The real tokens' rows have a data-dependent count; XLA (`jit_compile`, an option of the
    pretraining and fine-tuning runners) compiles it as a bounded dynamic shape."""
    import tensorflow as tf

    block = layers.TransformerEncoderBlock(4, 64, dropout=0.0, attention_dropout=0.0)
    x = np.random.default_rng(1).normal(size=(2, 5, 32)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], "int32")
    eager = keras.ops.convert_to_numpy(block(x, padding_mask=mask))
    compiled = tf.function(lambda x, mask: block(x, padding_mask=mask), jit_compile=True)(x, mask)
    np.testing.assert_allclose(compiled.numpy(), eager, atol=1e-5)


# --- The family layers (ELECTRA, SpanBERT, XLNet) through the same helper ------------------------


def test_token_embedding():
    run_layer_test(
        layers.TokenEmbedding,
        {"vocabulary_size": VOCAB, "embedding_size": HIDDEN, "dropout": 0.0},
        {"token_ids": token_ids(), "segment_ids": np.zeros((BATCH, SEQ), "int32")},
        (BATCH, SEQ, HIDDEN),
    )


def test_mask_embedding():
    run_layer_test(
        xlnet.MaskEmbedding,
        {"hidden_size": HIDDEN},
        {"target_mapping": rng.random((BATCH, 3, SEQ)).astype("float32")},
        (BATCH, 3, HIDDEN),
    )


def test_tied_output_projection():
    run_layer_test(
        xlnet.TiedOutputProjection,
        {"token_embedding": keras.layers.ReversibleEmbedding(VOCAB, HIDDEN)},
        {"inputs": hidden_states()},
        (BATCH, SEQ, VOCAB),
        mixed_output_dtype="float32",
    )


def test_replaced_token_detection_head():
    run_layer_test(
        electra.ReplacedTokenDetectionHead,
        {},
        {"sequence": hidden_states()},
        (BATCH, SEQ),
        mixed_output_dtype="float32",
    )


def test_generator_corruption():
    logits = rng.normal(size=(BATCH, 3, VOCAB)).astype("float32")
    run_layer_test(
        electra.GeneratorCorruption,
        {"temperature": 1.0, "seed": 3},
        {
            "generator_logits": logits,
            "token_ids": token_ids(),
            "masked_positions": np.array([[1, 2, 4], [0, 3, 0]], "int32"),
            "masked_lm_ids": token_ids(seq=3),
            "masked_lm_weights": np.array([[1, 1, 1], [1, 1, 0]], "float32"),
            "sample_seed": np.array([[7, 11], [7, 11]], "int32"),
        },
        ((BATCH, SEQ), (BATCH, SEQ)),
        mixed_output_dtype="float32",
        trainable=False,
    )


def test_span_boundary_head():
    run_layer_test(
        spanbert.SpanBoundaryHead,
        {"token_embedding": keras.layers.ReversibleEmbedding(VOCAB, HIDDEN), "max_span_length": 4},
        {
            "sequence": hidden_states(),
            "left_positions": np.array([[0, 0], [1, 1]], "int32"),
            "right_positions": np.array([[3, 3], [4, 4]], "int32"),
            "offsets": np.array([[0, 1], [0, 1]], "int32"),
        },
        (BATCH, 2, VOCAB),
        mixed_output_dtype="float32",
    )


def test_relative_position_encoding():
    run_layer_test(
        xlnet.RelativePositionEncoding,
        {"hidden_size": HIDDEN},
        {"sequence": hidden_states()},
        (1, 2 * SEQ, HIDDEN),
        symbolic_output_shape=(1, None, HIDDEN),
        trainable=False,
    )


def relative_inputs():
    encoding = xlnet.RelativePositionEncoding(HIDDEN)(hidden_states())
    masks = xlnet.TwoStreamMasks()(PADDING, np.zeros((BATCH, SEQ), "int32"))
    # The encoding is shared by the batch ([1, R, H]); repeated here so `fit` sees one batch size.
    return {
        "content": hidden_states(),
        "position_encoding": np.repeat(ops.convert_to_numpy(encoding), BATCH, axis=0),
        "content_mask": ops.convert_to_numpy(masks[0]).astype("int32"),
        "segment_matrix": ops.convert_to_numpy(masks[2]),
    }


def test_relative_attention():
    run_layer_test(
        xlnet.RelativeAttention,
        {"num_heads": HEADS, "head_size": HIDDEN // HEADS, "attention_dropout": 0.0},
        relative_inputs(),
        (BATCH, SEQ, HIDDEN),
        symbolic_output_shape=(None, SEQ, HIDDEN),
    )


def test_relative_encoder_block():
    run_layer_test(
        xlnet.RelativeEncoderBlock,
        {"num_heads": HEADS, "intermediate_size": 32, "dropout": 0.0, "attention_dropout": 0.0},
        relative_inputs(),
        (BATCH, SEQ, HIDDEN),
        symbolic_output_shape=(None, SEQ, HIDDEN),
    )


def test_two_stream_masks():
    run_layer_test(
        xlnet.TwoStreamMasks,
        {},
        {"padding_mask": PADDING, "segment_ids": np.array([[0, 0, 0, 1, 1, 1]] * 2, "int32")},
        ((BATCH, SEQ, SEQ), (BATCH, SEQ, SEQ), (BATCH, SEQ, SEQ)),
        trainable=False,
    )


def test_every_public_layer_goes_through_the_shared_helper():
    import glob
    import os
    import re

    folder = os.path.dirname(os.path.abspath(__file__))
    text = "".join(open(path, encoding="utf-8").read() for path in glob.glob(os.path.join(folder, "test_*.py")))
    tested = set(re.findall(r"run_layer_test\(\s*(?:layers\.)?([A-Z]\w+)", text))
    public = {name for name in layers.__all__ if isinstance(getattr(layers, name), type)}
    assert public - tested == set(), "give these a run_layer_test"


# Under JAX a length off the block grid (padded to it) and the one-token window (blocks of one row);
# the other cases take the same ops at other sizes.
@pytest.mark.other_backend_cases("4-11", "1-5")
@pytest.mark.parametrize("window, length", [(4, 11), (4, 2), (128, 300), (6, 12), (1, 5)])
def test_banded_sliding_window_equals_the_dense_band_mask(window, length):
    """The band-by-band computation (linear in the length) against dense attention under
    `local_attention_mask`, with padding, lengths off the block grid and windows wider than the text."""
    from bertlayers.layers.masking import local_attention_mask, merge_attention_masks

    attention = layers.RotaryAttention(HEADS, HIDDEN // HEADS, rotary_theta=100.0)
    x = rng.normal(size=(2, length, HIDDEN)).astype("float32")
    padding = np.ones((2, length), "int32")
    padding[1, length * 2 // 3 :] = 0
    dense = attention(x, attention_mask=merge_attention_masks(padding, local_attention_mask(x, window)))
    banded = attention(x, attention_mask=padding[:, None, :], attention_window=window)
    real = padding.astype(bool)
    np.testing.assert_allclose(np.asarray(banded)[real], np.asarray(dense)[real], atol=1e-5)


def test_a_windowed_block_computes_rows_and_full_output_alike():
    """The block's banded full output and its dense rows at chosen positions agree."""
    block = layers.TransformerEncoderBlock(
        HEADS,
        32,
        dropout=0.0,
        attention_dropout=0.0,
        attention_window=4,
        attention_layer=layers.RotaryAttention(HEADS, HIDDEN // HEADS, rotary_theta=50.0),
    )
    x = rng.normal(size=(2, 13, HIDDEN)).astype("float32")
    padding = np.ones((2, 13), "int32")
    padding[1, 9:] = 0
    full = np.asarray(block(x, padding_mask=padding))
    positions = np.array([[0, 5, 12], [1, 4, 8]], "int32")
    rows = np.asarray(block(x, padding_mask=padding, output_positions=positions))
    np.testing.assert_allclose(rows, np.take_along_axis(full, positions[:, :, None], axis=1), atol=1e-5)


def test_packed_rows_give_the_masks_and_positions_of_each_sequence():
    sequence_ids = np.array([[1, 1, 1, 2, 2, 0], [1, 2, 2, 2, 3, 3]], "int32")
    run_layer_test(
        layers.PackedRows,
        {},
        {"sequence_ids": sequence_ids},
        {"padding_mask": (BATCH, SEQ), "attention_mask": (BATCH, SEQ, SEQ), "positions": (BATCH, SEQ)},
        trainable=False,
    )
    rows = layers.PackedRows()(sequence_ids)
    np.testing.assert_array_equal(rows["positions"], [[0, 1, 2, 0, 1, 0], [0, 0, 1, 2, 0, 1]])
    np.testing.assert_array_equal(rows["padding_mask"], sequence_ids > 0)
    expected = (sequence_ids[:, :, None] == sequence_ids[:, None, :]) & (sequence_ids[:, None, :] > 0)
    np.testing.assert_array_equal(rows["attention_mask"], expected)


@pytest.mark.parametrize("mask_rows", [False, True])
def test_attention_in_query_chunks_equals_the_whole(mask_rows):
    """A long sequence's scores a chunk of queries at a time (only one chunk's in memory) give the
    whole computation's output, with a key mask or a mask per query, off the chunk grid."""
    attention = layers.RotaryAttention(HEADS, HIDDEN // HEADS, rotary_theta=100.0)
    x = rng.normal(size=(2, 11, HIDDEN)).astype("float32")
    padding = np.ones((2, 11), "int32")
    padding[1, 7:] = 0
    mask = padding[:, None, :]
    if mask_rows:
        mask = mask * np.tril(np.ones((11, 11), "int32"))[None]
    whole = np.asarray(attention(x, attention_mask=mask))
    attention.query_chunk = 4
    chunked = np.asarray(attention(x, attention_mask=mask))
    np.testing.assert_allclose(chunked, whole, atol=1e-5)
