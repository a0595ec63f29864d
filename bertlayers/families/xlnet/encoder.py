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

import keras
from keras import ops

from bertlayers.families.xlnet.mask_embedding import MaskEmbedding
from bertlayers.families.xlnet.relative_encoder_block import RelativeEncoderBlock
from bertlayers.families.xlnet.relative_position_encoding import RelativePositionEncoding
from bertlayers.families.xlnet.two_stream_masks import TwoStreamMasks
from bertlayers.layers.initializers import bert_initializer
from bertlayers.networks.block_stack import BlockStack, StackOutputs
from bertlayers.networks.encoder_base import EncoderBase, block_arguments, token_embedding_for


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

    def make_embeddings(self, config, dtype):
        return token_embedding_for(config, dtype)

    def make_block(self, config, index, dtype):
        if config.norm_first:
            raise ValueError("XLNet's blocks are post-LayerNorm; EncoderConfig.norm_first must be False.")
        return RelativeEncoderBlock(**block_arguments(config), dtype=dtype, name=f"transformer_layer_{index}")

    def make_stack(self, config, blocks, block_of_layer, dtype):
        return RelativeStack(
            blocks,
            config,
            clamp_len=self.clamp_len,
            mem_len=self.mem_len,
            bidirectional_data=self.bidirectional_data,
            dtype=dtype,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {"clamp_len": self.clamp_len, "mem_len": self.mem_len, "bidirectional_data": self.bidirectional_data}
        )
        return config


class RelativeStack(BlockStack):
    """XLNet's stack: relative positions, two-stream masks and memory around its blocks.

    It owns the parts every layer shares (`layers()`: the relative position encoding, the
    two-stream masks, the streams' dropout) and the query stream's start vector
    (`mask_embedding`), which only the pretrainer's graph calls (`unused_layers`). With
    `mem_len > 0` the model takes a `memory` input and outputs `memory`.
    """

    def __init__(self, blocks, config, clamp_len=-1, mem_len=0, bidirectional_data=False, dtype=None):
        super().__init__(blocks, range(config.num_layers))
        self.config = config
        self.mem_len = mem_len
        policy = blocks[0].dtype_policy
        self.position_encoding = RelativePositionEncoding(
            config.hidden_size,
            clamp_len=clamp_len,
            bidirectional_data=bidirectional_data,
            dtype=policy,
            name="position_encoding",
        )
        self.attention_masks = TwoStreamMasks(name="attention_masks")
        self.stream_dropout = keras.layers.Dropout(config.dropout, dtype=policy, name="stream_dropout")
        self.mask_embedding = MaskEmbedding(
            config.hidden_size,
            initializer=bert_initializer(config.initializer_range),
            dtype=policy,
            name="mask_embedding",
        )
        self.mask_embedding.build()

    def inputs(self):
        inputs = super().inputs()
        if self.mem_len:
            inputs["memory"] = keras.Input(shape=(self.config.num_layers, None, self.config.hidden_size), name="memory")
        return inputs

    def layers(self):
        return {
            "position_encoding": self.position_encoding,
            "attention_masks": self.attention_masks,
            "stream_dropout": self.stream_dropout,
            "mask_embedding": self.mask_embedding,
        }

    def unused_layers(self):
        return [self.mask_embedding]

    @property
    def computes_rows(self):
        return False

    def __call__(self, x, inputs, return_attention_scores=False):
        stack = relative_stack(
            self,
            x,
            inputs["padding_mask"],
            inputs["segment_ids"],
            memory=inputs.get("memory"),
            return_attention_scores=return_attention_scores,
        )
        extra = {"memory": stack["memory"]} if self.mem_len else {}
        return StackOutputs(stack["content"], stack["hidden_states"], stack["attention_scores"], extra)


def relative_stack(
    stack,
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
      stack: the `RelativeStack` whose blocks and shared parts (position encoding, masks,
        dropout) run.
      content: `[B, S, H]` token embeddings; query: `[B, T, H]` or None.
      memory: `[B, L, M, H]` or None.

    Returns:
      {"content": [B, S, H], "query": [B, T, H] or None, "hidden_states": L x [B, S, H],
       "attention_scores": L x [B, N, S, K] (content stream, when asked), "memory":
       [B, L, M', H] or None}.
    """
    encoder, config, blocks = stack, stack.config, stack.blocks
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
        stack = relative_stack(
            self._encoder().stack,
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
