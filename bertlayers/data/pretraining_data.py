"""From raw documents to TFRecords, and from TFRecords to batches for `model.fit`."""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf

from bertlayers.data.mlm_masking import MaskingConfig, mask_example
from bertlayers.data.pretraining_examples import create_examples
from bertlayers.data.tfrecords import parse_records, serialize_example
from bertlayers.data.tokenizer import wordpiece_tokenizer
from bertlayers.data.vocabulary import VocabularyInfo

OBJECTIVES = ("mlm_nsp", "mlm", "ltr")


@dataclasses.dataclass
class DataStats:
    examples: int
    tokens: int
    masked: int
    files: list


def tokenize_documents(documents, tokenizer):
    """Documents of sentences → documents of WordPiece id lists (empty ones dropped)."""
    sentences = [s for d in documents for s in d]
    ids = []
    for start in range(0, len(sentences), 4096):
        batch = tokenizer(tf.constant(sentences[start : start + 4096]))
        # keras-hub returns python lists in eager mode and a RaggedTensor in a graph.
        ids.extend(batch.to_list() if hasattr(batch, "to_list") else batch)
    tokenized, offset = [], 0
    for document in documents:
        sentences = [s for s in ids[offset : offset + len(document)] if s]
        offset += len(document)
        if sentences:
            tokenized.append(sentences)
    return tokenized


def write_pretraining_data(
    documents,
    vocabulary_path,
    output_dir,
    sequence_length=128,
    max_predictions_per_seq=20,
    mode="nsp",
    masking=None,
    dupe_factor=5,
    short_seq_prob=0.1,
    num_shards=4,
    lowercase=True,
    seed=12345,
    verbose=True,
):
    """Create static-masked pretraining TFRecords (google-research/bert's format).

    Each of `dupe_factor` passes over the documents builds examples and masks anew; all
    examples are shuffled and written round-robin to `num_shards` files. The same inputs and
    seed give byte-identical files.

    Args:
      documents: list of documents (lists of sentence strings).
      vocabulary_path: a WordPiece vocab.txt.
      output_dir: where `pretrain-XXXXX-of-YYYYY.tfrecord` files go.
      mode: "nsp", "sop" or "single" (see `create_examples`).
      masking: a `MaskingConfig`, or None for unmasked records (dynamic masking or the
        left-to-right LM add their own targets later).

    Returns:
      `DataStats` with the file paths.
    """
    rng = np.random.default_rng(seed)
    vocab = VocabularyInfo.from_file(vocabulary_path)
    tokenizer = wordpiece_tokenizer(vocabulary_path, lowercase=lowercase)
    tokenized = tokenize_documents(documents, tokenizer)

    progress = keras.utils.Progbar(dupe_factor * len(tokenized), unit_name="document") if verbose else None
    records, tokens, masked = [], 0, 0
    for _ in range(dupe_factor):
        for start in range(0, len(tokenized), 64):
            # Pairs draw their random next segments from the whole corpus, not the slice.
            examples = create_examples(
                tokenized, vocab, sequence_length, mode, short_seq_prob, rng, document_range=(start, start + 64)
            )
            for example in examples:
                if masking is not None:
                    result = mask_example(example.token_ids, vocab, masking, rng)
                    token_ids, positions, labels = result.token_ids, result.positions, result.labels
                else:
                    token_ids, positions, labels = example.token_ids, [], []
                records.append(
                    serialize_example(
                        token_ids, example.segment_ids, positions, labels, example.label,
                        sequence_length, max_predictions_per_seq,
                    )
                )
                tokens += len(token_ids)
                masked += len(positions)
            if progress:
                progress.add(min(64, len(tokenized) - start))
    order = rng.permutation(len(records))

    os.makedirs(output_dir, exist_ok=True)
    files = [os.path.join(output_dir, f"pretrain-{i:05d}-of-{num_shards:05d}.tfrecord") for i in range(num_shards)]
    writers = [tf.io.TFRecordWriter(f + ".tmp") for f in files]
    for n, index in enumerate(order):
        writers[n % num_shards].write(records[index])
    for writer in writers:
        writer.close()
    for f in files:
        os.replace(f + ".tmp", f)  # a shard appears complete or not at all
    return DataStats(examples=len(records), tokens=tokens, masked=masked, files=files)


# --- Batches for model.fit -----------------------------------------------------------------


def dynamic_mask(token_ids, padding_mask, seed, vocab, masking):
    """Mask a batch inside the tf.data graph (RoBERTa's dynamic masking).

    Randomness is stateless, keyed by `seed` (a [2] int tensor derived from the batch's
    index in the stream), so every epoch draws new masks yet a resumed run draws exactly the
    masks an uninterrupted run would. Token-level choice with the 80/10/10 replacement.

    Args:
      token_ids, padding_mask: int32 `[batch, seq]`.
      seed: int `[2]`.
      vocab: a `VocabularyInfo`.
      masking: a `MaskingConfig` (its rates and `max_predictions_per_seq` are used).

    Returns:
      masked token_ids `[batch, seq]`, positions, labels, weights `[batch, P]`.
    """
    seeds = tf.random.experimental.stateless_split(seed, 4)
    predictions = masking.max_predictions_per_seq
    selectable = tf.cast(padding_mask, tf.bool)
    for special in vocab.never_masked_ids:
        selectable &= tf.not_equal(token_ids, special)
    count = tf.reduce_sum(tf.cast(selectable, tf.float32), axis=1)
    budget = tf.minimum(predictions, tf.maximum(1, tf.cast(tf.round(count * masking.masked_lm_prob), tf.int32)))
    budget = tf.minimum(budget, tf.cast(count, tf.int32))

    scores = tf.random.stateless_uniform(tf.shape(token_ids), seeds[0])
    scores = tf.where(selectable, scores, 2.0)
    order = tf.argsort(scores, axis=1)[:, :predictions]
    valid = tf.range(predictions)[tf.newaxis, :] < budget[:, tf.newaxis]
    positions = tf.sort(tf.where(valid, order, tf.shape(token_ids)[1]), axis=1)
    valid = positions < tf.shape(token_ids)[1]
    positions = tf.where(valid, positions, 0)
    labels = tf.gather(token_ids, positions, batch_dims=1)

    draw = tf.random.stateless_uniform(tf.shape(positions), seeds[1])
    replacement = tf.gather(
        tf.constant(vocab.replacement_ids),
        tf.random.stateless_uniform(tf.shape(positions), seeds[2], 0, len(vocab.replacement_ids), tf.int32),
    )
    values = tf.where(
        draw < masking.mask_token_rate,
        vocab.mask_id,
        tf.where(draw < masking.mask_token_rate + masking.random_token_rate, replacement, labels),
    )
    batch_index = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, tf.newaxis], tf.shape(positions))
    indices = tf.stack([tf.boolean_mask(batch_index, valid), tf.boolean_mask(positions, valid)], axis=1)
    masked = tf.tensor_scatter_nd_update(token_ids, indices, tf.boolean_mask(values, valid))
    return masked, positions, labels, tf.cast(valid, tf.float32)


def _normalized(weights):
    """Scale per-prediction weights so a plain mean over the global batch is BERT's weighted mean.

    BERT's loss is Σ w·loss / Σ w. Keras's default reduction divides by the element count,
    per replica under tf.distribute; multiplying w by count / Σ w over the whole (global)
    batch, before the strategy splits it, makes every strategy compute BERT's loss exactly.
    """
    total = tf.reduce_sum(weights)
    return weights * tf.cast(tf.size(weights), weights.dtype) / tf.maximum(total, 1.0)


def pretraining_dataset(
    files,
    batch_size,
    sequence_length,
    max_predictions_per_seq,
    objective="mlm_nsp",
    vocabulary_path=None,
    dynamic_masking=None,
    shuffle_buffer=10000,
    seed=0,
    skip_batches=0,
    passes=1,
):
    """An endless, deterministic stream of `(x, y, sample_weight)` batches for `model.fit`.

    x: token_ids, segment_ids, padding_mask `[batch, seq]` (+ masked_positions `[batch, P]`).
    y / sample_weight by objective:
      "mlm_nsp": {"mlm": masked_lm_ids, "nsp": next_sentence_labels} (BERT, ALBERT's SOP).
      "mlm":     {"mlm": masked_lm_ids} (RoBERTa).
      "ltr":     {"lm": next token ids `[batch, seq]`} (left-to-right LM).
    Batches have a static shape (`drop_remainder=True`), as TPUs need. The order is fixed by
    `seed`, the same for every iterator; the first `passes` passes over the records are each
    shuffled differently, then the order repeats. `skip_batches` starts the stream further on
    (resuming a run).

    Args:
      dynamic_masking: a `MaskingConfig` to draw masks here every epoch (RoBERTa); the
        records' own masks are then ignored. Needs `vocabulary_path`.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"Unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}.")
    vocab = VocabularyInfo.from_file(vocabulary_path) if dynamic_masking is not None else None
    if dynamic_masking is not None and dynamic_masking.max_predictions_per_seq != max_predictions_per_seq:
        dynamic_masking = dataclasses.replace(dynamic_masking, max_predictions_per_seq=max_predictions_per_seq)

    records = tf.data.TFRecordDataset(sorted(files))
    # Each pass over the records gets its own fixed shuffle, seeded by (seed, pass). A
    # reshuffling `shuffle().repeat()` would give every new iterator another order, so a
    # resumed run or a distributed one (which create other iterators) would see other batches.
    dataset = records.shuffle(shuffle_buffer, seed=seed * 1_000_003, reshuffle_each_iteration=False)
    for data_pass in range(1, max(1, passes)):
        dataset = dataset.concatenate(
            records.shuffle(shuffle_buffer, seed=seed * 1_000_003 + data_pass, reshuffle_each_iteration=False)
        )
    dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(lambda s: parse_records(s, sequence_length, max_predictions_per_seq))
    # The batch's index in the stream keys its dynamic masks; it is counted before the skip.
    dataset = dataset.enumerate()

    def to_model_inputs(index, features):
        x = {
            "token_ids": features["input_ids"],
            "segment_ids": features["segment_ids"],
            "padding_mask": features["input_mask"],
        }
        if objective == "ltr":
            token_ids, mask = features["input_ids"], features["input_mask"]
            next_ids = tf.pad(token_ids[:, 1:], [[0, 0], [0, 1]])
            next_mask = tf.cast(tf.pad(mask[:, 1:], [[0, 0], [0, 1]]), tf.float32)
            return x, {"lm": next_ids}, {"lm": _normalized(next_mask)}
        if dynamic_masking is not None:
            seed_pair = tf.stack([tf.constant(seed, tf.int64), index])
            x["token_ids"], positions, labels, weights = dynamic_mask(
                features["input_ids"], features["input_mask"], seed_pair, vocab, dynamic_masking
            )
        else:
            positions = features["masked_lm_positions"]
            labels = features["masked_lm_ids"]
            weights = features["masked_lm_weights"]
        x["masked_positions"] = positions
        y, sample_weight = {"mlm": labels}, {"mlm": _normalized(weights)}
        if objective == "mlm_nsp":
            y["nsp"] = features["next_sentence_labels"][:, 0]
            sample_weight["nsp"] = tf.ones([batch_size], tf.float32)
        return x, y, sample_weight

    dataset = dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    options = tf.data.Options()
    # Workers split each global batch (as one device would see it) instead of reading
    # different files: a multi-worker run then follows the single-device run step for step.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
