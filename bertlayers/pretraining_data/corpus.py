"""Read raw text corpora into documents: lists of sentences.

Formats:
  - BERT's own: one sentence per line, a blank line between documents.
  - Plain text: paragraphs separated by blank lines, split into sentences here; one document
    per file.
  - JSONL: one JSON object per line with a "text" field (one document each).
  - A MediaWiki XML dump (`.xml` or `.xml.bz2`), such as the Wikipedia excerpt shipped in gensim.
"""

import bz2
import dataclasses
import json
import os
import re

from bertlayers.utils.text_files import numbered_lines, read_text

# A sentence ends at . ! or ? followed by space and an upper-case letter, digit or quote.
# Good enough for pretraining segments (a missed split only makes one segment longer).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")
_ABBREVIATIONS = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|e\.g|i\.e|No|Vol|Fig|U\.S)\.$")
_HEADING = re.compile(r"^\s*=+.*=+\s*$")
_WIKI_MARKUP = re.compile(r"'{2,}")


def split_sentences(text):
    """Split a paragraph into sentences."""
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        candidate = text[start : match.start()].strip()
        if _ABBREVIATIONS.search(candidate):
            continue
        if candidate:
            sentences.append(candidate)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def text_to_sentences(text):
    """Sentences of a plain-text document (blank-line separated paragraphs)."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = " ".join(paragraph.split())
        if paragraph:
            sentences.extend(split_sentences(paragraph))
    return sentences


def read_bert_format(path):
    """Documents of a file in BERT's format (sentence per line, blank line between documents)."""
    documents, current = [], []
    for _, line in numbered_lines(path):
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    return documents


def read_plain_text(path):
    sentences = text_to_sentences(read_text(path))
    return [sentences] if sentences else []


def read_jsonl(path, field="text"):
    documents = []
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not valid JSON ({error.msg}).") from None
        if not isinstance(record, dict) or field not in record:
            raise ValueError(f"{path}:{number}: no {field!r} field.")
        if not isinstance(record[field], str):
            raise ValueError(f"{path}:{number}: field {field!r} holds a {type(record[field]).__name__}, not a text.")
        sentences = text_to_sentences(record[field])
        if sentences:
            documents.append(sentences)
    return documents


def clean_wikitext(text):
    """Plain paragraphs from wikitext already passed through gensim's `filter_wiki`."""
    lines = [line for line in text.splitlines() if not _HEADING.match(line)]
    return _WIKI_MARKUP.sub("", "\n".join(lines))


def _wikipedia_pages(path):
    """(title, wikitext passed through gensim's `filter_wiki`) of each article of a MediaWiki XML
    dump; redirects are skipped."""
    try:
        from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    except ImportError:
        raise ImportError("Reading a Wikipedia dump needs gensim: pip install gensim==4.4.0") from None
    opener = bz2.BZ2File if path.endswith(".bz2") else open
    with opener(path, "rb") as f:
        for title, text, _page_id in extract_pages(f):
            if not text.lstrip().upper().startswith("#REDIRECT"):
                yield title, filter_wiki(text)


def read_wikipedia_dump(path, min_sentences=2):
    """Documents (one per article) of a MediaWiki XML dump; redirects and stubs are skipped."""
    documents = []
    for _title, text in _wikipedia_pages(path):
        sentences = text_to_sentences(clean_wikitext(text))
        if len(sentences) >= min_sentences:
            documents.append(sentences)
    return documents


@dataclasses.dataclass(frozen=True)
class WikipediaParagraph:
    title: str  # the article's
    section: str  # the heading the paragraph is under; "" in the lead
    sentences: tuple


def read_wikipedia_paragraphs(path):
    """The articles of a MediaWiki XML dump as lists of `WikipediaParagraph`s (articles without a
    paragraph are left out)."""
    articles = []
    for title, text in _wikipedia_pages(path):
        paragraphs, section = [], ""
        for block in re.split(r"\n\s*\n", text):
            lines = []
            for line in block.splitlines():
                if _HEADING.match(line):
                    section = line.strip().strip("=").strip()
                else:
                    lines.append(line)
            sentences = text_to_sentences(_WIKI_MARKUP.sub("", "\n".join(lines)))
            if sentences:
                paragraphs.append(WikipediaParagraph(title, section, tuple(sentences)))
        if paragraphs:
            articles.append(paragraphs)
    return articles


def wikipedia_excerpt_path():
    """The real English Wikipedia excerpt (106 articles) shipped inside gensim's wheel."""
    try:
        import gensim
    except ImportError:
        raise FileNotFoundError("The Wikipedia excerpt ships with gensim: pip install gensim==4.4.0") from None
    return os.path.join(
        os.path.dirname(gensim.__file__),
        "test",
        "test_data",
        "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    )


CORPUS_FORMATS = ("auto", "bert", "text", "jsonl", "wikipedia")


def read_corpus(path, corpus_format="auto"):
    """Documents of `path` in `corpus_format` ("bert", "text", "jsonl", "wikipedia" or "auto")."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"No corpus file at {path}.")
    if corpus_format == "auto":
        if ".xml" in os.path.basename(path):
            corpus_format = "wikipedia"
        elif path.endswith(".jsonl"):
            corpus_format = "jsonl"
        else:
            corpus_format = "bert"
    readers = {
        "bert": read_bert_format,
        "text": read_plain_text,
        "jsonl": read_jsonl,
        "wikipedia": read_wikipedia_dump,
    }
    if corpus_format not in readers:
        raise ValueError(f"Unknown corpus format {corpus_format!r}; known: {', '.join(readers)}.")
    documents = readers[corpus_format](path)
    if not documents:
        raise ValueError(f"{path} holds no text (read as format {corpus_format!r}); nothing to pretrain on.")
    return documents
