"""ELMo's biLM in miniature (Peters et al. 2018; notes 003): pretrain it on the Wikipedia excerpt
(--recipe elmo of pretrain.py), measure each direction's perplexity on held-out articles, set the
biLM's nearest contexts of a word against word2vec's nearest words (the paper's "play" table;
word2vec trained by gensim on the same training sentences), and compare frozen features on Rotten
Tomatoes sentiment: word2vec, ELMo, both concatenated, and a BERT (bert_tiny) pretrained on the
same text with examples/pretrain.py, its layers mixed the same way (run_classifier.py
--feature_based). Each feature set feeds a scalar mix (ELMo's, BERT's) and a BiLSTM, over the same
epochs and seeds. Writes elmo.json, elmo.md and (with matplotlib installed) elmo.png, the
sentiment rows' seeds, to --output_dir; the runs are in its subfolders (a killed run resumes, a
finished one is reused).

    python examples/prepare_datasets.py          # the Rotten Tomatoes splits
    python examples/elmo.py --output_dir runs/elmo
    python examples/elmo.py --output_dir runs/elmo --word play --sources "dictating play" "had a play"
    python examples/elmo.py --output_dir runs/elmo --export_dir savedmodels   # and serve ELMo vectors from text
"""

import json
import math
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.families.elmo.data import bilm_words, corpus_sentences
from bertlayers.families.elmo.neighbours import nearest_contexts
from bertlayers.pretraining_data.corpus import read_corpus, wikipedia_excerpt_path
from bertlayers.runs.pretraining import PretrainingConfig, run_pretraining
from bertlayers.utils import atomic_files
from bertlayers.utils.charts import seed_spread
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import NON_NEGATIVE_INT, POSITIVE_INT, flag

DEFAULT_SOURCES = ("dictating play", "had a play produced", "thought to play an important role")


def write_split(documents, folder, heldout):
    """The excerpt's articles as BERT-format files: all but the last `heldout` to train on."""
    paths = {name: os.path.join(folder, f"{name}.txt") for name in ("train", "heldout")}
    parts = {"train": documents[:-heldout], "heldout": documents[-heldout:]}
    for name, path in paths.items():
        if not os.path.exists(path):
            atomic_files.write_text(path, "\n\n".join("\n".join(d) for d in parts[name]) + "\n")
    return paths, parts["train"]


def word2vec(sentences, seed):
    """word2vec (skip-gram, gensim) on the training sentences."""
    from gensim.models import Word2Vec

    return Word2Vec(sentences, vector_size=128, window=5, min_count=3, sg=1, epochs=10, seed=seed, workers=1).wv


def sentiment_rows(args, encoder, vectors):
    """Rotten Tomatoes test accuracy per feature set and seed: {row: [accuracy, ...]}."""
    import keras
    import numpy as np

    from bertlayers.families.elmo.features import WordFeatureBatches, word_feature_classifier
    from bertlayers.task_data.classification import read_text_examples

    train = read_text_examples(os.path.join(args.rt_dir, "train.csv"))
    test = read_text_examples(os.path.join(args.rt_dir, "test.csv"))
    labels = sorted({e.label for e in train})
    table = np.concatenate([np.zeros((1, vectors.vector_size), np.float32), vectors.vectors])  # row 0: unknown
    index = {word: i + 1 for i, word in enumerate(vectors.index_to_key)}
    rows = {"word2vec": (None, table), "ELMo": (encoder, None), "ELMo + word2vec": (encoder, table)}
    results = {}
    for name, (elmo, static) in rows.items():
        results[name] = []
        for seed in args.seeds:
            record = os.path.join(args.output_dir, "sentiment", f"{name.replace(' + ', '_')}_seed{seed}.json")
            if os.path.exists(record):
                results[name].append(json.load(open(record, encoding="utf-8"))["accuracy"])
                continue
            keras.utils.set_random_seed(seed)
            model = word_feature_classifier(len(labels), elmo, static)
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                metrics={"logits": ["accuracy"]},
            )
            batches = WordFeatureBatches(
                [e.text_a for e in train], [labels.index(e.label) for e in train], index, seed=seed
            )
            model.fit(batches, epochs=args.epochs, verbose=2)
            evaluation = WordFeatureBatches([e.text_a for e in test], [labels.index(e.label) for e in test], index)
            accuracy = float(model.evaluate(evaluation, verbose=0, return_dict=True)["accuracy"])
            print(f"{name}, seed {seed}: {accuracy:.4f}")
            atomic_files.make_folder(os.path.dirname(record))
            atomic_files.write_json(record, {"accuracy": accuracy})
            results[name].append(accuracy)
    return results


def bert_row(args, paths):
    """bert_tiny pretrained on the same training articles, its frozen layers through
    run_classifier.py --feature_based, per seed."""
    import subprocess
    import sys

    bert = os.path.join(args.output_dir, "bert")
    config = PretrainingConfig(
        output_dir=bert, recipe="bert", corpus=paths["train"], corpus_format="bert", seed=args.seed, verbose=2
    )
    run_pretraining(config)
    accuracies = []
    for seed in args.seeds:
        out = os.path.join(args.output_dir, "sentiment", f"bert_seed{seed}")
        if not os.path.exists(os.path.join(out, "metrics.json")):
            command = [
                sys.executable,
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_classifier.py"),
                *("--train_file", os.path.join(args.rt_dir, "train.csv")),
                *("--eval_file", os.path.join(args.rt_dir, "test.csv")),
                *("--init", bert, "--feature_based", "--epochs", str(args.epochs), "--sequence_length", "64"),
                *("--seed", str(seed), "--output_dir", out, "--verbose", "2"),
            ]
            subprocess.run(command, check=True)
        accuracies.append(json.load(open(os.path.join(out, "metrics.json"), encoding="utf-8"))["accuracy"])
    return accuracies


def majority_accuracy(args):
    """The test split's accuracy when every snippet gets the training split's most common label."""
    from collections import Counter

    from bertlayers.task_data.classification import read_text_examples

    train, test = (read_text_examples(os.path.join(args.rt_dir, f"{name}.csv")) for name in ("train", "test"))
    majority = Counter(e.label for e in train).most_common(1)[0][0]
    return sum(e.label == majority for e in test) / len(test)


def spread(values):
    return f"{100 * sum(values) / len(values):.1f} [{100 * min(values):.1f}, {100 * max(values):.1f}]"


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--output_dir", required=True, help="where bilm/, elmo.json and elmo.md go")
    parser.add_argument("--num_train_steps", type=flag(POSITIVE_INT), default=1200, help="the biLM's steps")
    parser.add_argument("--batch_size", type=flag(POSITIVE_INT), default=32, help="sentences per step")
    parser.add_argument(
        "--sequence_length", type=flag(POSITIVE_INT), default=32, help="words per sentence, <S> </S> in"
    )
    parser.add_argument("--units", type=flag(POSITIVE_INT), default=512, help="LSTM cell width")
    parser.add_argument(
        "--projection_units", type=flag(POSITIVE_INT), default=128, help="each layer's width per direction"
    )
    parser.add_argument("--vocabulary_size", type=flag(POSITIVE_INT), default=10000, help="the softmax's words")
    parser.add_argument(
        "--heldout_articles", type=flag(POSITIVE_INT), default=6, help="the excerpt's last articles, held out"
    )
    parser.add_argument("--word", default="play", help="the word whose neighbours are compared")
    parser.add_argument(
        "--sources", nargs="+", default=list(DEFAULT_SOURCES), help="source sentences, each found by a part of it"
    )
    parser.add_argument("--seed", type=flag(POSITIVE_INT), default=1, help="of the biLM's run and of word2vec")
    parser.add_argument("--rt_dir", default="data/rotten_tomatoes", help="prepare_datasets.py's Rotten Tomatoes splits")
    parser.add_argument("--epochs", type=flag(POSITIVE_INT), default=3, help="of every sentiment run")
    parser.add_argument("--seeds", type=flag(NON_NEGATIVE_INT), nargs="+", default=[0, 1, 2], help="sentiment seeds")
    parser.add_argument(
        "--export_dir", default=None, help="also export the biLM here for TF Serving: text in, ELMo vectors out"
    )
    args = parser.parse_args()
    for name in ("train.csv", "test.csv"):
        if not os.path.isfile(os.path.join(args.rt_dir, name)):
            raise FileNotFoundError(f"No {name} in {args.rt_dir} (python examples/prepare_datasets.py writes them).")

    documents = read_corpus(wikipedia_excerpt_path(), "wikipedia")
    data_folder = os.path.join(args.output_dir, "data")
    atomic_files.make_folder(data_folder)
    paths, train_documents = write_split(documents, data_folder, args.heldout_articles)
    config = PretrainingConfig(
        output_dir=os.path.join(args.output_dir, "bilm"),
        recipe="elmo",
        corpus=paths["train"],
        corpus_format="bert",
        eval_corpus=paths["heldout"],
        vocabulary_size=args.vocabulary_size,
        sequence_length=args.sequence_length,
        batch_size=args.batch_size,
        num_train_steps=args.num_train_steps,
        checkpoint_every=args.num_train_steps // 6 if args.num_train_steps % 6 == 0 else args.num_train_steps,
        seed=args.seed,
        options={"units": args.units, "projection_units": args.projection_units},
        verbose=2,
    )
    summary = run_pretraining(config)
    perplexity = {
        direction: {
            when: round(math.exp(summary[f"heldout_{when}_{direction}_loss"]), 1) for when in ("before", "after")
        }
        for direction in ("forward", "backward")
    }

    import keras

    encoder = keras.saving.load_model(os.path.join(config.output_dir, "encoder.keras"), safe_mode=True)
    sentences = [s for s in corpus_sentences(train_documents, 10_000)]
    contexts, similarity = nearest_contexts(encoder, args.word, sentences)
    texts = [" ".join(sentences[i]) for i, _ in contexts]
    table = []
    for part in args.sources:
        matches = [k for k, text in enumerate(texts) if " ".join(bilm_words(part)) in text]
        if not matches:
            raise ValueError(f"No training sentence holding {args.word!r} contains {part!r} (--sources).")
        source = matches[0]
        nearest = int(similarity[source].argmax())
        table.append(
            {"source": texts[source], "nearest": texts[nearest], "cosine": round(float(similarity[source, nearest]), 3)}
        )
    vectors = word2vec(sentences, args.seed)
    static = [(w, round(float(s), 3)) for w, s in vectors.most_similar(args.word, topn=8)]
    sentiment = sentiment_rows(args, encoder, vectors)
    sentiment["BERT (bert_tiny), same text"] = bert_row(args, paths)

    result = {
        "heldout_perplexity": perplexity,
        "contexts_of_word": len(contexts),
        "word": args.word,
        "word2vec_nearest": static,
        "bilm_nearest_contexts": table,
        "rotten_tomatoes_accuracy": sentiment,
        "bilm": {k: summary[k] for k in ("steps", "encoder_parameters", "pretrainer_parameters", "vocabulary_size")},
        "settings": vars(args),
    }
    if args.export_dir:
        from bertlayers.export.elmo_vectors import export_elmo

        result["exported"] = export_elmo(encoder, args.export_dir, name="elmo")
        print(f"Exported {result['exported']}: text in, ELMo vectors out")
    atomic_files.write_json(os.path.join(args.output_dir, "elmo.json"), result, indent=1)
    lines = [
        "| direction | held-out perplexity before training | after |",
        "|---|---|---|",
        *(f"| {d} | {p['before']:,} | {p['after']:,} |" for d, p in perplexity.items()),
        "",
        f"| source | nearest neighbours of {args.word!r} |",
        "|---|---|",
        f"| word2vec | {', '.join(w for w, _ in static)} |",
        *(f"| biLM: {row['source']} | {row['nearest']} (cosine {row['cosine']}) |" for row in table),
        "",
        f"| frozen features | Rotten Tomatoes accuracy, mean [min, max] of {len(args.seeds)} seeds |",
        "|---|---|",
        *(f"| {name} | {spread(values)} |" for name, values in sentiment.items()),
        f"| (every snippet the majority class) | {100 * majority_accuracy(args):.1f} |",
    ]
    atomic_files.write_text(os.path.join(args.output_dir, "elmo.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    chart, axis = os.path.join(args.output_dir, "elmo.png"), "Rotten Tomatoes accuracy (%), frozen features"
    accuracy = {name: [100 * v for v in values] for name, values in sentiment.items()}
    majority = ("every snippet the majority class", 100 * majority_accuracy(args))
    seed_spread({axis: accuracy}, chart, "ELMo's biLM against its peers", baselines={axis: majority})  # logs its path


if __name__ == "__main__":
    run_script(main)
