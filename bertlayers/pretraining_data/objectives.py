"""From raw documents to TFRecords, and from TFRecords to batches for `model.fit`."""

import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import Optional

import keras
import numpy as np

from bertlayers.pretraining_data.examples import MODES, create_examples
from bertlayers.pretraining_data.masking_units import UNIT_STRATEGIES, joined_pieces, phrase_model, sentence_units
from bertlayers.pretraining_data.mlm_masking import MaskingConfig, mask_example
from bertlayers.pretraining_data.tfrecords import parse_records, serialize_example
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer
from bertlayers.tokenizers.vocabulary import VocabularyInfo
from bertlayers.utils.atomic_files import atomic_path
from bertlayers.utils.cli import plain_progress
from bertlayers.utils.options import check_options, option, options_with
from bertlayers.utils.validation import POSITIVE_INT, PROBABILITY, Range

tf = require_tensorflow(__name__)


@dataclasses.dataclass(frozen=True)
class BatchContext:
    """What a data objective may read while it turns parsed records into a batch."""

    vocab: VocabularyInfo
    masking: MaskingConfig  # the run's rates and max_predictions_per_seq
    batch_size: int


@dataclasses.dataclass(frozen=True)
class RecordContext:
    """What a data objective may read while it computes a record's extra features."""

    vocab: VocabularyInfo
    rng: np.random.Generator  # the writer's: choices made with it are reproducible
    max_predictions_per_seq: int


@dataclasses.dataclass(frozen=True)
class DataObjective:
    """How a recipe's records are made, and how a batch of them feeds its pretrainer.

    Attributes:
      examples: the example layout written to records: "nsp", "sop" or "single".
      masking: "static" (masks chosen when records are written, google-research/bert's way),
        "dynamic" (records unmasked; `batch_inputs` masks each batch) or None (no masks).
      batch_inputs: `(features, seed, context) -> (x, y, sample_weight)`, inside tf.data:
        `features` are the parsed records `[batch, ...]`, `seed` an int64 `[2]` unique to the
        batch (stateless randomness: a resumed run draws what an uninterrupted one would).
      masking_strategy: a strategy the recipe requires ("span" for SpanBERT), or None to
        use the run's.
      masking_rates: MaskingConfig fields the recipe fixes (ELECTRA's 85% [MASK], 0% random).
      extra_features: `(sequence_length, max_predictions_per_seq) -> {name: length}`, record
        features beyond google-research/bert's.
      record_extras: `(masked_example, token_ids, context) -> {name: values}`, their values
        when a record is written (`masked_example` is None for unmasked records; `context`
        a `RecordContext`).
      inputs: `(config, work_dir, batch_size, num_train_steps, skip_batches) -> inputs` with
        `dataset`, `vocabulary` (a path), `vocab` (`.size`, `.tokens`) and `num_records`: a data
        path of the recipe's own instead of WordPiece records (ELMo's words and characters);
        None for records.
    """

    examples: str
    masking: Optional[str]
    batch_inputs: Callable
    masking_strategy: Optional[str] = None
    masking_rates: dict = dataclasses.field(default_factory=dict)
    extra_features: Optional[Callable] = None
    record_extras: Optional[Callable] = None
    inputs: Optional[Callable] = None

    def feature_lengths(self, sequence_length, max_predictions_per_seq):
        """The extra record features {name: length} (empty for google-research/bert's records)."""
        return self.extra_features(sequence_length, max_predictions_per_seq) if self.extra_features else {}

    def masking_config(self, masking):
        """The run's `MaskingConfig` with what this objective fixes applied."""
        changes = dict(self.masking_rates)
        if self.masking_strategy:
            changes["strategy"] = self.masking_strategy
        return dataclasses.replace(masking, **changes) if changes else masking


@dataclasses.dataclass
class DataStats:
    examples: int
    tokens: int
    masked: int
    files: list


def tokenize_documents(documents, tokenizer, units=None):
    """Documents of sentences → documents of WordPiece id lists (empty ones dropped).

    `units`: `(sentence) -> [(text, is_unit)]` (`masking_units.sentence_units`): each part is
    tokenized apart, and a unit's pieces after its first are `JoinedPiece`s. None: whole sentences.
    """
    parts = [units(s) if units else [(s, False)] for d in documents for s in d]  # per sentence
    texts = [text for sentence in parts for text, _ in sentence]
    ids = []
    for start in range(0, len(texts), 4096):
        batch = tokenizer(tf.constant(texts[start : start + 4096]))
        ids.extend(batch.to_list())  # ragged [texts, (pieces)]
    sentences, offset = [], 0
    for sentence in parts:
        sentences.append(joined_pieces([(ids[offset + i], is_unit) for i, (_, is_unit) in enumerate(sentence)]))
        offset += len(sentence)
    tokenized, offset = [], 0
    for document in documents:
        kept = [s for s in sentences[offset : offset + len(document)] if s]
        offset += len(document)
        if kept:
            tokenized.append(kept)
    return tokenized


def masking_units(documents, masking):
    """The `units` `tokenize_documents` takes for `masking`'s strategy (None: words are the units)."""
    if masking is None or masking.strategy not in UNIT_STRATEGIES:
        return None
    phrases = phrase_model(documents) if masking.strategy == "phrase" else None
    return lambda sentence: sentence_units(sentence, masking.strategy, phrases)


@dataclasses.dataclass
class RecordOptions:
    """How pretraining records are made from documents (each setting with its help and range)."""

    sequence_length: int = option(128, "pieces per example, [CLS] and [SEP]s included", Range(int, 2))
    max_predictions_per_seq: int = option(20, "most masked positions per example", POSITIVE_INT)
    mode: str = option(
        "nsp",
        "sentence pairs for next-sentence prediction, for sentence order, or single segments",
        choices=MODES,
    )
    dupe_factor: int = option(5, "passes over the documents, each with other masks", POSITIVE_INT)
    short_seq_prob: float = option(0.1, "share of examples made shorter than sequence_length", PROBABILITY)
    num_shards: int = option(4, "files the records are written round-robin to", POSITIVE_INT)
    lowercase: bool = option(True, "lower-case and strip accents before WordPiece (uncased models)")
    seed: int = option(12345, "seed of the examples and masks", Range(int))
    verbose: bool = option(True, "a progress bar over the documents")

    def __post_init__(self):
        check_options(self)


def write_pretraining_data(
    documents: list,
    vocabulary_path: str,
    output_dir: str,
    masking: MaskingConfig | None = None,
    objective: DataObjective | None = None,
    options: RecordOptions | None = None,
    **settings,
) -> DataStats:
    """Create static-masked pretraining TFRecords (google-research/bert's format).

    Each of `dupe_factor` passes over the documents builds examples and masks anew; all
    examples are shuffled and written round-robin to `num_shards` files. The same inputs and
    seed give byte-identical files.

    Args:
      documents: list of documents (lists of sentence strings).
      vocabulary_path: a WordPiece vocab.txt.
      output_dir: where `pretrain-XXXXX-of-YYYYY.tfrecord` files go.
      masking: a `MaskingConfig`, or None for unmasked records (dynamic masking or the
        left-to-right LM add their own targets later).
      objective: a `DataObjective` whose extra record features are written too (None: only
        google-research/bert's features).
      options: a `RecordOptions`; `settings` (its fields by name: `sequence_length=64`,
        `mode="sop"`, `dupe_factor=2`, ...) change it.

    Returns:
      `DataStats` with the file paths.
    """
    options = options_with(RecordOptions, options, settings, "write_pretraining_data")
    sequence_length, max_predictions_per_seq, mode = (
        options.sequence_length,
        options.max_predictions_per_seq,
        options.mode,
    )
    dupe_factor, short_seq_prob, num_shards = options.dupe_factor, options.short_seq_prob, options.num_shards
    lowercase, seed, verbose = options.lowercase, options.seed, options.verbose
    rng = np.random.default_rng(seed)
    vocab = VocabularyInfo.from_file(vocabulary_path)
    # The implementation a served text model tokenizes with: records and requests get the same ids.
    tokenizer = ModelTokenizer.from_vocab_file(vocabulary_path, lowercase=lowercase).in_graph().tokenize
    tokenized = tokenize_documents(documents, tokenizer, masking_units(documents, masking))
    extra_features = objective.feature_lengths(sequence_length, max_predictions_per_seq) if objective else {}
    record_context = RecordContext(vocab, rng, max_predictions_per_seq)

    progress = (
        keras.utils.Progbar(dupe_factor * len(tokenized), unit_name="document", verbose=plain_progress(1))
        if verbose
        else None
    )
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
                    result, token_ids, positions, labels = None, example.token_ids, [], []
                extra = objective.record_extras(result, token_ids, record_context) if extra_features else None
                records.append(
                    serialize_example(
                        token_ids,
                        example.segment_ids,
                        positions,
                        labels,
                        example.label,
                        sequence_length,
                        max_predictions_per_seq,
                        extra=extra,
                        extra_features=extra_features,
                    )
                )
                tokens += len(token_ids)
                masked += len(positions)
            if progress:
                progress.add(min(64, len(tokenized) - start))
    order = rng.permutation(len(records))

    os.makedirs(output_dir, exist_ok=True)
    files = [os.path.join(output_dir, f"pretrain-{i:05d}-of-{num_shards:05d}.tfrecord") for i in range(num_shards)]
    with contextlib.ExitStack() as stack:  # each shard appears complete or not at all
        writers = [tf.io.TFRecordWriter(stack.enter_context(atomic_path(f))) for f in files]
        for n, index in enumerate(order):
            writers[n % num_shards].write(records[index])
        for writer in writers:
            writer.close()
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


def normalized_weights(weights):
    """Scale per-prediction weights so a plain mean over the global batch is BERT's weighted mean.

    BERT's loss is Σ w·loss / Σ w. Keras's default reduction divides by the element count,
    per replica under tf.distribute; multiplying w by count / Σ w over the whole (global)
    batch, before the strategy splits it, makes every strategy compute BERT's loss exactly.
    """
    total = tf.reduce_sum(weights)
    return weights * tf.cast(tf.size(weights), weights.dtype) / tf.maximum(total, 1.0)


def encoder_inputs_from(features):
    """The encoder's three inputs from parsed records (google-research/bert's names)."""
    return {
        "token_ids": features["input_ids"],
        "segment_ids": features["segment_ids"],
        "padding_mask": features["input_mask"],
    }


def masked_lm_batch(features, seed, context, dynamic):
    """x with `masked_positions`, and the masked LM's labels and weights `[batch, P]`:
    from the records (static) or drawn for this batch (dynamic)."""
    x = encoder_inputs_from(features)
    if dynamic:
        x["token_ids"], positions, labels, weights = dynamic_mask(
            features["input_ids"], features["input_mask"], seed, context.vocab, context.masking
        )
    else:
        positions = features["masked_lm_positions"]
        labels = features["masked_lm_ids"]
        weights = features["masked_lm_weights"]
    x["masked_positions"] = positions
    return x, labels, weights


def _mlm_nsp_batch(features, seed, context):
    x, labels, weights = masked_lm_batch(features, seed, context, dynamic=False)
    y = {"mlm": labels, "nsp": features["next_sentence_labels"][:, 0]}
    return x, y, {"mlm": normalized_weights(weights), "nsp": tf.ones([context.batch_size], tf.float32)}


def _dynamic_mlm_batch(features, seed, context):
    x, labels, weights = masked_lm_batch(features, seed, context, dynamic=True)
    return x, {"mlm": labels}, {"mlm": normalized_weights(weights)}


def _left_to_right_batch(features, seed, context):
    token_ids, mask = features["input_ids"], features["input_mask"]
    next_ids = tf.pad(token_ids[:, 1:], [[0, 0], [0, 1]])
    next_mask = tf.cast(tf.pad(mask[:, 1:], [[0, 0], [0, 1]]), tf.float32)
    return encoder_inputs_from(features), {"lm": next_ids}, {"lm": normalized_weights(next_mask)}


# The BERT paper's objectives and their variants (the recipes in bertlayers/families/bert/recipes.py).
OBJECTIVES = {
    "mlm_nsp": DataObjective(examples="nsp", masking="static", batch_inputs=_mlm_nsp_batch),
    "mlm_sop": DataObjective(examples="sop", masking="static", batch_inputs=_mlm_nsp_batch),
    "mlm": DataObjective(examples="single", masking="dynamic", batch_inputs=_dynamic_mlm_batch),
    "ltr": DataObjective(examples="single", masking=None, batch_inputs=_left_to_right_batch),
}


def pretraining_dataset(
    files,
    batch_size,
    sequence_length,
    max_predictions_per_seq,
    objective="mlm_nsp",
    vocabulary_path=None,
    masking=None,
    shuffle_buffer=10000,
    seed=0,
    skip_batches=0,
    passes=1,
):
    """An endless, deterministic stream of `(x, y, sample_weight)` batches for `model.fit`.

    x: token_ids, segment_ids, padding_mask `[batch, seq]` plus what the objective adds
    (masked_positions `[batch, P]` for the masked LMs); y / sample_weight: the objective's
    (`DataObjective.batch_inputs`). Batches have a static shape (`drop_remainder=True`), as
    TPUs need. The order is fixed by `seed`, the same for every iterator; the first `passes`
    passes over the records are each shuffled differently, then the order repeats.
    `skip_batches` starts the stream further on (resuming a run).

    Args:
      objective: a `DataObjective`, or the name of one of `OBJECTIVES`.
      vocabulary_path: the run's vocab.txt (needed by objectives that mask per batch).
      masking: the run's `MaskingConfig` (default rates); the objective's own settings apply.
    """
    if isinstance(objective, str):
        if objective not in OBJECTIVES:
            raise ValueError(f"Unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}.")
        objective = OBJECTIVES[objective]
    masking = objective.masking_config(
        dataclasses.replace(masking or MaskingConfig(), max_predictions_per_seq=max_predictions_per_seq)
    )
    vocab = VocabularyInfo.from_file(vocabulary_path) if vocabulary_path else None
    if objective.masking == "dynamic" and vocab is None:
        raise ValueError("An objective that masks each batch needs the vocabulary (vocabulary_path).")
    context = BatchContext(vocab=vocab, masking=masking, batch_size=batch_size)
    extra_features = objective.feature_lengths(sequence_length, max_predictions_per_seq)

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
    dataset = dataset.map(lambda s: parse_records(s, sequence_length, max_predictions_per_seq, extra_features))
    # The batch's index in the stream keys its random draws; it is counted before the skip.
    dataset = dataset.enumerate()

    def to_model_inputs(index, features):
        return objective.batch_inputs(features, tf.stack([tf.constant(seed, tf.int64), index]), context)

    dataset = dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    options = tf.data.Options()
    # Workers split each global batch (as one device would see it) instead of reading
    # different files: a multi-worker run then follows the single-device run step for step.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
