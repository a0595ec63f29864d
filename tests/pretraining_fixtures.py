"""A small real corpus, vocabulary and TFRecords shared by the pretraining tests, and a helper
to run examples/pretrain.py in a subprocess (strategies need a fresh TensorFlow)."""

import json
import os
import subprocess
import sys

from bertlayers.data.corpus import read_wikipedia_dump, wikipedia_excerpt_path
from bertlayers.data.mlm_masking import MaskingConfig
from bertlayers.data.pretraining_data import write_pretraining_data
from bertlayers.data.vocabulary import build_wordpiece_vocabulary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ, PREDICTIONS, VOCAB_SIZE = 64, 10, 1000


def make_corpus(directory):
    """The first Wikipedia articles in BERT's format, a 1k WordPiece vocabulary trained on
    them, and static-masked NSP TFRecords."""
    documents = read_wikipedia_dump(wikipedia_excerpt_path())[:12]
    corpus = os.path.join(directory, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in documents) + "\n")
    vocabulary = os.path.join(directory, "vocab.txt")
    build_wordpiece_vocabulary(documents, VOCAB_SIZE, vocabulary)
    stats = write_pretraining_data(
        documents, vocabulary, os.path.join(directory, "records"), sequence_length=SEQ,
        max_predictions_per_seq=PREDICTIONS, masking=MaskingConfig(max_predictions_per_seq=PREDICTIONS),
        dupe_factor=1, num_shards=2, verbose=False,
    )
    return {"corpus": corpus, "vocabulary": vocabulary, "files": stats.files}


def common_args(corpus, output_dir, steps, every, *extra):
    return [
        "--output_dir", str(output_dir), "--vocabulary", corpus["vocabulary"], "--input_files", *corpus["files"],
        "--sequence_length", str(SEQ), "--max_predictions_per_seq", str(PREDICTIONS), "--batch_size", "8",
        "--num_train_steps", str(steps), "--checkpoint_every", str(every), "--learning_rate", "2e-3",
        "--dropout", "0.0", "--verbose", "2", *extra,
    ]


def environment(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def pretrain_command(args):
    return [sys.executable, os.path.join(REPO, "examples", "pretrain.py"), *args]


def run_pretrain(args, timeout=300, **env):
    result = subprocess.run(
        pretrain_command(args), env=environment(**env), capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def history(output_dir, name="history.json"):
    with open(os.path.join(output_dir, name), encoding="utf-8") as f:
        return json.load(f)
