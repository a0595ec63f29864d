"""A pretraining run's data from one spec: vocabulary, records (made once and cached, or
given), checked, and the batch stream its objective feeds to `model.fit`."""

import dataclasses
import hashlib
import json
import logging
import os
from typing import Optional

from bertlayers.pretraining_data.corpus import CORPUS_FORMATS, CORPUS_FORMATS_HELP, read_corpus, wikipedia_excerpt_path
from bertlayers.pretraining_data.mlm_masking import STRATEGIES as MASKINGS
from bertlayers.pretraining_data.mlm_masking import MaskingConfig
from bertlayers.pretraining_data.objectives import pretraining_dataset, write_pretraining_data
from bertlayers.pretraining_data.tfrecords import check_tfrecords
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.vocabulary import VocabularyInfo, build_wordpiece_vocabulary
from bertlayers.utils.assets import bert_uncased_vocabulary
from bertlayers.utils.atomic_files import atomic_path, write_json
from bertlayers.utils.options import option
from bertlayers.utils.validation import POSITIVE_INT, PROBABILITY, Range

logger = logging.getLogger(__name__)

tf = require_tensorflow(__name__)


@dataclasses.dataclass
class PretrainingDataConfig:
    """Where a run's data comes from and how its records are made.

    `input_files` (existing TFRecords) replace the corpus; `vocabulary_size` trains a WordPiece
    vocabulary on the corpus instead of using `vocabulary` (default: bert-base-uncased's).
    """

    corpus: Optional[str] = option(None, "text to pretrain on (default: the Wikipedia excerpt that ships with gensim)")
    corpus_format: str = option("auto", CORPUS_FORMATS_HELP, choices=CORPUS_FORMATS)
    input_files: Optional[list] = option(None, "existing TFRecords to train on instead of a corpus", flag=False)
    vocabulary: Optional[str] = option(None, "WordPiece vocab.txt (default: bert-base-uncased's)")
    vocabulary_size: Optional[int] = option(
        None, "train a WordPiece vocabulary of this size on the corpus instead", POSITIVE_INT
    )
    lowercase: bool = option(True, "lower-case and strip accents before WordPiece (uncased models)")
    sequence_length: int = option(128, "pieces per example, [CLS] and [SEP]s included", Range(int, 2))
    max_predictions_per_seq: int = option(20, "most masked positions per example", POSITIVE_INT)
    masking: str = option(
        "token", "which pieces are masked together: single tokens, whole words, or spans of words", choices=MASKINGS
    )
    masked_lm_prob: float = option(0.15, "share of the pieces masked", Range(float, 0, 1, low_open=True))
    dupe_factor: int = option(2, "times each document is made into examples, each with other masks", POSITIVE_INT)
    short_seq_prob: float = option(
        0.1, "share of examples made shorter than sequence_length (as BERT's data does)", PROBABILITY
    )
    seed: int = option(0, "seed of the data, the masks and the initial weights", Range(int))
    verbose: int = option(1, "0 silent, 1 progress bar, 2 one line per epoch", Range(int, 0, 2))

    def check_files(self, *more):
        """A FileNotFoundError naming each given input file (and each of `more` given) that does not
        exist, before a run writes anything."""
        given = [self.corpus, self.vocabulary, *(self.input_files or []), *more]
        missing = [path for path in given if path is not None and not os.path.isfile(path)]
        if missing:
            raise FileNotFoundError(f"No such file: {', '.join(map(str, missing))}.")

    def masking_config(self, objective):
        return objective.masking_config(
            MaskingConfig(
                strategy=self.masking,
                masked_lm_prob=self.masked_lm_prob,
                max_predictions_per_seq=self.max_predictions_per_seq,
            )
        )


@dataclasses.dataclass
class PretrainingInputs:
    """What a run gets from `pretraining_inputs`."""

    dataset: tf.data.Dataset  # endless (x, y, sample_weight) batches
    vocabulary: str  # the vocab.txt path
    vocab: VocabularyInfo
    files: list
    num_records: int


def pretraining_inputs(config, work_dir, objective, batch_size, num_train_steps, skip_batches=0):
    """The run's vocabulary and checked records, and its batch stream from `skip_batches` on.

    Args:
      config: a `PretrainingDataConfig`.
      work_dir: where what is made is kept (a trained vocab.txt; `data/`, the cached records).
      objective: the recipe's `DataObjective` (its example layout, masking, extra features
        and batch function).
      batch_size, num_train_steps: how much the run consumes (sets how many distinct shuffled
        passes the stream holds before it repeats).
    """
    if objective.inputs is not None:  # the recipe's own data path
        return objective.inputs(config, work_dir, batch_size, num_train_steps, skip_batches)
    vocabulary = resolve_vocabulary(config, work_dir)
    vocab = VocabularyInfo.from_file(vocabulary)
    files = _records(config, work_dir, objective, vocabulary)
    counts = check_tfrecords(
        files,
        config.sequence_length,
        config.max_predictions_per_seq,
        vocabulary_size=vocab.size,
        extra_features=objective.feature_lengths(config.sequence_length, config.max_predictions_per_seq),
    )
    num_records = sum(counts.values())
    logger.info(f"Training data: {num_records} records in {len(files)} files")
    masking = config.masking_config(objective)
    wanted = round(masking.masked_lm_prob * config.sequence_length)
    if objective.masking and masking.max_predictions_per_seq < wanted:
        logger.warning(
            f"max_predictions_per_seq {masking.max_predictions_per_seq} caps the masking rate "
            f"{masking.masked_lm_prob:.0%} at {masking.max_predictions_per_seq / config.sequence_length:.0%} of "
            f"{config.sequence_length} tokens; pass --max_predictions_per_seq {wanted} for the full rate."
        )
    dataset = pretraining_dataset(
        files,
        batch_size,
        config.sequence_length,
        config.max_predictions_per_seq,
        objective=objective,
        vocabulary_path=vocabulary,
        masking=config.masking_config(objective),
        seed=config.seed,
        skip_batches=skip_batches,
        passes=min(1000, num_train_steps * batch_size // num_records + 1),
    )
    return PretrainingInputs(dataset=dataset, vocabulary=vocabulary, vocab=vocab, files=files, num_records=num_records)


def file_digest(path):
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def resolve_vocabulary(config, work_dir):
    """The run's vocab.txt: the given one, one trained on the corpus, or bert-base-uncased's."""
    if config.vocabulary and config.vocabulary_size:
        raise ValueError("Give --vocabulary or --vocabulary_size, not both.")
    if not config.vocabulary_size:
        return config.vocabulary or bert_uncased_vocabulary()
    path = os.path.join(work_dir, "vocab.txt")
    if not os.path.exists(path):
        corpus = config.corpus or wikipedia_excerpt_path()
        logger.info(f"Training a {config.vocabulary_size}-token WordPiece vocabulary on {corpus} ...")
        documents = read_corpus(corpus, config.corpus_format)
        with atomic_path(path) as temporary:
            build_wordpiece_vocabulary(documents, config.vocabulary_size, temporary, lowercase=config.lowercase)
    return path


def _data_spec(config, objective, vocabulary):
    corpus = config.corpus or wikipedia_excerpt_path()
    masking = config.masking_config(objective)
    return {
        "corpus": os.path.abspath(config.corpus) if config.corpus else "wikipedia-excerpt",
        # Keyed on content, not names: an edited corpus is never mistaken for the cached records.
        "corpus_sha256": file_digest(corpus) if os.path.isfile(corpus) else None,
        "vocabulary_sha256": file_digest(vocabulary),
        "vocabulary": os.path.abspath(vocabulary),
        "examples": objective.examples,
        "masking": masking.strategy if objective.masking == "static" else None,
        "extra_features": sorted(objective.feature_lengths(config.sequence_length, config.max_predictions_per_seq)),
        "masked_lm_prob": config.masked_lm_prob,
        "lowercase": config.lowercase,
        "sequence_length": config.sequence_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "dupe_factor": config.dupe_factor,
        "short_seq_prob": config.short_seq_prob,
        "seed": config.seed,
    }


def _records(config, work_dir, objective, vocabulary):
    """TFRecords for the run: given files, or made once from the corpus and cached."""
    if config.input_files:
        return list(config.input_files)
    spec = _data_spec(config, objective, vocabulary)
    data_dir = os.path.join(work_dir, "data")
    spec_path = os.path.join(data_dir, "data_spec.json")
    if os.path.exists(spec_path):
        with open(spec_path, encoding="utf-8") as f:
            recorded = json.load(f)
        if recorded == spec:
            return sorted(os.path.join(data_dir, n) for n in os.listdir(data_dir) if n.endswith(".tfrecord"))
        differs = [key for key in spec if recorded.get(key) != spec[key]]
        raise ValueError(
            f"{data_dir} holds data made from other inputs (they differ in {differs}; see {spec_path}). "
            f"Use a new --output_dir, or delete {data_dir} to make the data again."
        )
    path = config.corpus or wikipedia_excerpt_path()
    logger.info(f"Reading {path} ...")
    documents = read_corpus(path, config.corpus_format)
    logger.info(f"Creating pretraining examples from {len(documents)} documents ...")
    # Every worker of a multi-worker run may prepare; each writes its own staging folder and the
    # first rename wins (the contents are identical: same inputs, same seed).
    try:
        with atomic_path(data_dir) as staging:
            stats = write_pretraining_data(
                documents,
                vocabulary,
                staging,
                sequence_length=config.sequence_length,
                max_predictions_per_seq=config.max_predictions_per_seq,
                mode=objective.examples,
                masking=config.masking_config(objective) if objective.masking == "static" else None,
                dupe_factor=config.dupe_factor,
                short_seq_prob=config.short_seq_prob,
                lowercase=config.lowercase,
                seed=config.seed,
                verbose=config.verbose > 0,
                objective=objective,
            )
            write_json(os.path.join(staging, "data_spec.json"), spec, indent=1)
            logger.info(f"  {stats.examples} examples, {stats.tokens} tokens, {stats.masked} masked")
    except OSError:
        if not os.path.exists(spec_path):  # not another worker's data already in place
            raise
    return _records(config, work_dir, objective, vocabulary)
