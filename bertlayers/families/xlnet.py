"""XLNet (Yang et al. 2019): permutation language modeling over a Transformer-XL encoder.

Dimensions: B batch, S sequence, M memory, T predictions, H hidden, L layers, V vocabulary.

The encoder embeds tokens only; positions enter every layer's attention as relative
distances and segments as "same segment or not" (`RelativeAttention`). Pretraining samples
a factorization order per example and predicts some tokens (the targets) each from the
tokens before it in that order:

    content stream  h  [B, S, H]   starts from the token embeddings; h_i sees itself
    query stream    g  [B, T, H]   starts from one learned mask vector at each target;
                                   g_t sees only what precedes target t in the order
    logits = g · TokenEmbᵀ + b    [B, T, V]

`perm_mask` [B, S, S] (1: i may not see j) carries the order and `target_mapping`
[B, T, S] (one-hot) places each prediction. Fine-tuning and serving run the content stream
alone: then the encoder is an ordinary bidirectional encoder, with the same outputs as
BERT's, pooled at the last real token (XLNet puts its [CLS] last).
"""

import functools

import keras
import tensorflow as tf
from keras import ops

from bertlayers.data.permutation_lm import choose_plm_targets, factorization_masks, xlnet_layout
from bertlayers.data.pretraining_data import DataObjective, normalized_weights
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.mask_embedding import MaskEmbedding
from bertlayers.layers.relative_encoder_block import RelativeEncoderBlock
from bertlayers.layers.relative_position_encoding import RelativePositionEncoding
from bertlayers.layers.tied_output_projection import TiedOutputProjection
from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.models.encoder_model import encoder_inputs
from bertlayers.models.pretrainer import PretrainerBase
from bertlayers.layers.two_stream_masks import TwoStreamMasks
from bertlayers.networks.encoder_base import EncoderBase, block_arguments
from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.utils.validation import NON_NEGATIVE_INT, Range


@keras.saving.register_keras_serializable(package="bertlayers")
class XLNetEncoder(EncoderBase):
    """XLNet's encoder (the content stream), with the query stream's parts for pretraining.

    Keyword arguments are the fields of `EncoderConfig` (`max_sequence_length` is the longest
    input it takes; nothing is learned per position) and:

    Args:
      clamp_len: relative distances beyond it share one encoding; -1: none.
      mem_len: keep the last `mem_len` hidden states of every layer as memory for the next
        segment (Transformer-XL recurrence, no gradient through it). With `mem_len > 0` the
        model takes a `memory` input `[B, L, M, H]` (M may be 0) and outputs `memory`
        `[B, L, min(M + S, mem_len), H]`. 0 (the default, and what serving uses): none.
      bidirectional_data: the second half of each batch holds the first half reversed
        (XLNet's `bi_data`): relative distances are negated there.

    Outputs: as `EncoderBase`'s (plus `memory` with `mem_len > 0`).
    """

    architecture = "xlnet"
    pooling_position = "last"

    def __init__(self, clamp_len=-1, mem_len=0, bidirectional_data=False, **kwargs):
        self.clamp_len = int(clamp_len)
        self.mem_len = int(mem_len)
        self.bidirectional_data = bool(bidirectional_data)
        if self.mem_len < 0:
            raise ValueError(f"mem_len must be >= 0, got {mem_len}.")
        super().__init__(**kwargs)

    def _factorizes_embedding(self, config):
        return False

    def _make_embeddings(self, config, dtype):
        return TokenEmbedding(
            vocabulary_size=config.vocabulary_size,
            embedding_size=config.hidden_size,
            max_sequence_length=config.max_sequence_length,
            type_vocab_size=config.type_vocab_size,
            dropout=config.dropout,
            initializer=bert_initializer(config.initializer_range),
            dtype=dtype,
            name="embeddings",
        )

    def make_block(self, config, index, dtype):
        if config.norm_first:
            raise ValueError("XLNet's blocks are post-LayerNorm; EncoderConfig.norm_first must be False.")
        return RelativeEncoderBlock(**block_arguments(config), dtype=dtype, name=f"transformer_layer_{index}")

    def _make_inputs(self, config):
        inputs = super()._make_inputs(config)
        if self.mem_len:
            inputs["memory"] = keras.Input(shape=(config.num_layers, None, config.hidden_size), name="memory")
        return inputs

    def _run_blocks(self, x, inputs, blocks, config, return_attention_scores):
        policy = blocks[0].dtype_policy
        # The parts every layer shares, built once here and kept for the pretrainer's graph.
        self.position_encoding = RelativePositionEncoding(
            config.hidden_size,
            clamp_len=self.clamp_len,
            bidirectional_data=self.bidirectional_data,
            dtype=policy,
            name="position_encoding",
        )
        self.attention_masks = TwoStreamMasks(name="attention_masks")
        self.stream_dropout = keras.layers.Dropout(config.dropout, dtype=policy, name="stream_dropout")
        self.mask_embedding = MaskEmbedding(
            config.hidden_size, initializer=bert_initializer(config.initializer_range), dtype=policy, name="mask_embedding"
        )
        self.mask_embedding.build()
        stack = relative_stack(
            self,
            config,
            blocks,
            x,
            inputs["padding_mask"],
            inputs["segment_ids"],
            memory=inputs.get("memory"),
            return_attention_scores=return_attention_scores,
        )
        extra = {"memory": stack["memory"]} if self.mem_len else {}
        return stack["content"], stack["hidden_states"], stack["attention_scores"], extra

    def layers_outside_graph(self):
        return [self.mask_embedding]

    def get_config(self):
        config = super().get_config()
        config.update(
            {"clamp_len": self.clamp_len, "mem_len": self.mem_len, "bidirectional_data": self.bidirectional_data}
        )
        return config


def relative_stack(
    encoder,
    config,
    blocks,
    content,
    padding_mask,
    segment_ids,
    query=None,
    perm_mask=None,
    target_mapping=None,
    memory=None,
    return_attention_scores=False,
):
    """XLNet's layers over the embedded content stream (and the query stream, if given).

    Args:
      encoder: the `XLNetEncoder` whose shared parts (position encoding, masks, dropout) run.
      config: its `EncoderConfig`.
      blocks: its `RelativeEncoderBlock`s, one per layer.
      content: `[B, S, H]` token embeddings; query: `[B, T, H]` or None.
      memory: `[B, L, M, H]` or None.

    Returns:
      {"content": [B, S, H], "query": [B, T, H] or None, "hidden_states": L x [B, S, H],
       "attention_scores": L x [B, N, S, K] (content stream, when asked), "memory":
       [B, L, M', H] or None}.
    """
    first_memory = None if memory is None else memory[:, 0]  # [B, M, H]
    positions = encoder.stream_dropout(encoder.position_encoding(content, first_memory))  # [1 or B, R, H]
    content_mask, query_mask, segment_matrix = encoder.attention_masks(
        padding_mask, segment_ids, perm_mask, first_memory
    )  # [B, S, K] each
    if query is not None:
        query = encoder.stream_dropout(query)
    hidden_states, attention_scores, new_memory = [], [], []
    for depth in range(config.num_layers):
        layer_memory = None if memory is None else memory[:, depth]  # [B, M, H]
        if memory is not None:
            # What this layer read, kept for the next segment; no gradient flows into the past.
            kept = ops.concatenate([ops.cast(layer_memory, content.dtype), content], axis=1)
            new_memory.append(ops.stop_gradient(kept[:, -encoder.mem_len :]))
        results = blocks[depth](
            content,
            positions,
            query=query,
            content_mask=content_mask,
            query_mask=query_mask,
            segment_matrix=segment_matrix,
            memory=layer_memory,
            target_mapping=target_mapping,
            return_attention_scores=return_attention_scores,
        )
        results = results if isinstance(results, tuple) else (results,)
        content = results[0]
        if query is not None:
            query = results[1]
        if return_attention_scores:
            attention_scores.append(results[1 if query is None else 2])  # [B, N, S, K]
        hidden_states.append(content)  # [B, S, H]
    content = encoder.stream_dropout(content)
    hidden_states[-1] = content
    return {
        "content": content,
        "query": None if query is None else encoder.stream_dropout(query),
        "hidden_states": hidden_states,
        "attention_scores": attention_scores,
        "memory": ops.stack(new_memory, axis=1) if memory is not None else None,
    }


class QueryStream(keras.layers.Layer):
    """The encoder's layers run over both streams, returning the query stream `[B, T, H]`.

    One layer around the two-stream pass, because Keras checks a functional graph assuming a
    layer returns as many tensors in every graph as in its first: the blocks' first call,
    in the encoder's own graph, returns the content stream alone.

    Call args: content `[B, S, H]`, query `[B, T, H]`, padding_mask and segment_ids
    `[B, S]`, perm_mask `[B, S, S]`, target_mapping `[B, T, S]`.
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        # Held in a closure, not tracked: the model owning this layer owns the encoder.
        self._encoder = lambda: encoder
        self.built = True

    def call(self, content, query, padding_mask, segment_ids, perm_mask, target_mapping):
        encoder = self._encoder()
        stack = relative_stack(
            encoder,
            encoder.config,
            encoder.transformer_layers,
            content,
            padding_mask,
            segment_ids,
            query=query,
            perm_mask=perm_mask,
            target_mapping=target_mapping,
        )
        return stack["query"]

    def compute_output_shape(self, content_shape, query_shape, *args):
        return tuple(query_shape)


@keras.saving.register_keras_serializable(package="bertlayers")
class XLNetPretrainer(PretrainerBase):
    """Permutation language modeling: the query stream predicts each target token.

    Inputs: the encoder's (`token_ids`, `segment_ids`, `padding_mask`), `perm_mask` float
    `[B, S, S]` (1: i may not see j) and `target_mapping` float `[B, T, S]` (one-hot rows;
    all-zero rows for unused predictions, weighted out of the loss).
    Output `plm`: float32 logits `[B, T, V]`, trained against the target tokens.

    Args:
      encoder: an `XLNetEncoder` (its memory, if any, is not used here).
    """

    uses_pooled_output = False

    def __init__(self, encoder, name="xlnet_pretrainer", trainable=True, **kwargs):
        inputs = encoder_inputs()
        inputs["perm_mask"] = keras.Input(shape=(None, None), name="perm_mask")
        inputs["target_mapping"] = keras.Input(shape=(None, None), name="target_mapping")
        content = encoder.embeddings(inputs["token_ids"], inputs["segment_ids"])  # [B, S, H]
        query = encoder.mask_embedding(inputs["target_mapping"])  # [B, T, H]
        query = QueryStream(encoder, name="query_stream")(
            content, query, inputs["padding_mask"], inputs["segment_ids"], inputs["perm_mask"], inputs["target_mapping"]
        )  # [B, T, H]
        lm_head = TiedOutputProjection(encoder.token_embedding, dtype=encoder.layer_dtype_policy, name="lm_head")
        outputs = {"plm": lm_head(query)}  # [B, T, V]
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.lm_head = lm_head
        self.head_names = ["plm"]

    def unused_layers(self):
        return [self.encoder.pooler]


# --- The recipe ---------------------------------------------------------------------------

TARGET_FEATURE = "plm_targets"  # 0/1 per position of the record: XLNet's `is_masked`


def _target_features(sequence_length, max_predictions_per_seq):
    return {TARGET_FEATURE: sequence_length}


def _record_targets(masked_example, token_ids, context):
    return {TARGET_FEATURE: choose_plm_targets(token_ids, context.vocab, context.max_predictions_per_seq, context.rng)}


def _plm_batch(features, seed, context, perm_size):
    vocab = context.vocab
    padding_mask = features["input_mask"]
    token_ids, segment_ids, is_target = xlnet_layout(
        features["input_ids"], features["segment_ids"], padding_mask, features[TARGET_FEATURE], vocab.cls_id
    )
    length = tf.shape(token_ids)[1]
    perm_mask, positions, weights = factorization_masks(
        token_ids,
        padding_mask,
        is_target,
        (vocab.sep_id, vocab.cls_id),
        seed,
        perm_size or length,
        context.masking.max_predictions_per_seq,
    )
    x = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
        "perm_mask": perm_mask,  # [B, S, S]
        "target_mapping": tf.one_hot(positions, length) * weights[:, :, tf.newaxis],  # [B, T, S]
    }
    labels = tf.gather(token_ids, positions, batch_dims=1)  # [B, T]
    return x, {"plm": labels}, {"plm": normalized_weights(weights)}


def plm_objective(options):
    """XLNet's data: pairs (the next-sentence label is unused), targets chosen when records
    are written, order and masks drawn per batch (`perm_size` 0: the whole sequence)."""
    return DataObjective(
        examples="nsp",
        masking=None,
        batch_inputs=functools.partial(_plm_batch, perm_size=options["perm_size"]),
        extra_features=_target_features,
        record_extras=_record_targets,
    )


def xlnet_config(config):
    """A preset's sizes as an XLNet encoder (segment 2 for [CLS])."""
    return config.replace(architecture="xlnet", type_vocab_size=3)


def build_pretrainer(encoder_config, dtype, options):
    encoder = XLNetEncoder.from_encoder_config(encoder_config, clamp_len=options["clamp_len"], dtype=dtype, name="encoder")
    return XLNetPretrainer(encoder)


RECIPE = register_recipe(
    Recipe(
        "xlnet",
        "permutation language modeling with two-stream relative attention (Yang et al. 2019)",
        plm_objective,
        build_pretrainer,
        loss_key="plm_loss",
        encoder_config=xlnet_config,
        options={
            "perm_size": Option(0, NON_NEGATIVE_INT, "tokens per permuted block; 0: the whole sequence"),
            "clamp_len": Option(-1, Range(int, -1), "relative distances beyond it share one encoding; -1: none"),
        },
        report=("plm_accuracy",),
    )
)
