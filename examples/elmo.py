"""ELMo's biLM in miniature (Peters et al. 2018; notes 003): pretrain it on the Wikipedia excerpt
(--recipe elmo of pretrain.py), measure each direction's perplexity on held-out articles, and
set the biLM's nearest contexts of a word against word2vec's nearest words (the paper's "play"
table; word2vec trained by gensim on the same training sentences). Writes elmo.json and elmo.md
to --output_dir; the biLM run is in --output_dir/bilm (a killed run resumes, a finished one is
reused).

    python examples/elmo.py --output_dir runs/elmo
    python examples/elmo.py --output_dir runs/elmo --word play --sources "dictating play" "had a play"
"""

import math
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.families.elmo.data import corpus_sentences, words_of
from bertlayers.families.elmo.neighbours import nearest_contexts
from bertlayers.pretraining_data.corpus import read_corpus, wikipedia_excerpt_path
from bertlayers.runs.pretraining import PretrainingConfig, run_pretraining
from bertlayers.utils import atomic_files
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, flag

DEFAULT_SOURCES = ("dictating play", "had a play produced", "thought to play an important role")


def write_split(documents, folder, heldout):
    """The excerpt's articles as BERT-format files: all but the last `heldout` to train on."""
    paths = {name: os.path.join(folder, f"{name}.txt") for name in ("train", "heldout")}
    parts = {"train": documents[:-heldout], "heldout": documents[-heldout:]}
    for name, path in paths.items():
        if not os.path.exists(path):
            atomic_files.write_text(path, "\n\n".join("\n".join(d) for d in parts[name]) + "\n")
    return paths, parts["train"]


def static_neighbours(sentences, word, seed):
    """word2vec (skip-gram, gensim) on the training sentences; `word`'s 8 nearest words."""
    from gensim.models import Word2Vec

    model = Word2Vec(sentences, vector_size=128, window=5, min_count=3, sg=1, epochs=10, seed=seed, workers=1)
    return [(w, round(float(s), 3)) for w, s in model.wv.most_similar(word, topn=8)]


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
    args = parser.parse_args()

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
        matches = [k for k, text in enumerate(texts) if " ".join(words_of(part)) in text]
        if not matches:
            raise SystemExit(f"No training sentence holding {args.word!r} contains {part!r} (--sources).")
        source = matches[0]
        nearest = int(similarity[source].argmax())
        table.append(
            {"source": texts[source], "nearest": texts[nearest], "cosine": round(float(similarity[source, nearest]), 3)}
        )
    static = static_neighbours(sentences, args.word, args.seed)

    result = {
        "heldout_perplexity": perplexity,
        "contexts_of_word": len(contexts),
        "word": args.word,
        "word2vec_nearest": static,
        "bilm_nearest_contexts": table,
        "bilm": {k: summary[k] for k in ("steps", "encoder_parameters", "pretrainer_parameters", "vocabulary_size")},
        "settings": vars(args),
    }
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
    ]
    atomic_files.write_text(os.path.join(args.output_dir, "elmo.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    run_script(main)
