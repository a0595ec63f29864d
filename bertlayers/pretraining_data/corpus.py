"""Read raw text corpora into documents: lists of sentences.

Formats (`CORPUS_FORMATS`):
  - "text": a document per line, split into sentences here.
  - "bert": BERT's own: one sentence per line, a blank line between documents.
  - "jsonl": one JSON object per line with a "text" field (one document each).
  - "wikipedia": a MediaWiki XML dump (`.xml` or `.xml.bz2`), such as the Wikipedia excerpt
    shipped in gensim.
  - "auto": by the file's name (.xml → wikipedia, .jsonl → jsonl), else by its lines: "bert"
    when blank lines separate its documents, "text" when none does, so a file of many lines is
    never read as one document.
"""

import bz2
import dataclasses
import json
import logging
import os
import re

from bertlayers.utils.text_files import json_value, numbered_lines

# A sentence ends at . ! or ? followed by space and an upper-case letter, digit or quote.
# Good enough for pretraining segments (a missed split only makes one segment longer).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")
_ABBREVIATIONS = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|e\.g|i\.e|No|Vol|Fig|U\.S)\.$")
_HEADING = re.compile(r"^\s*=+.*=+\s*$")
_WIKI_MARKUP = re.compile(r"'{2,}")

logger = logging.getLogger(__name__)


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


def read_document_lines(path):
    """Documents of a file holding a document per line (each line split into sentences)."""
    documents = []
    for _, line in numbered_lines(path):
        sentences = split_sentences(" ".join(line.split()))
        if sentences:
            documents.append(sentences)
    return documents


def read_jsonl(path, field="text"):
    documents = []
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = json_value(line, f"{path}:{number}")
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


CORPUS_FORMATS = ("auto", "text", "bert", "jsonl", "wikipedia")
CORPUS_FORMATS_HELP = (
    "'text' (a document per line), 'bert' (a sentence per line, a blank line between documents), "
    "'jsonl' (a document per line, its 'text' field), 'wikipedia' (a MediaWiki XML dump, .xml or .xml.bz2) "
    "or 'auto' (by the name: .xml, .jsonl; else 'bert' when blank lines separate documents, 'text' when none does)"
)
_READERS = {
    "text": read_document_lines,
    "bert": read_bert_format,
    "jsonl": read_jsonl,
    "wikipedia": read_wikipedia_dump,
}


def corpus_format_of(path: str) -> str:
    """The format "auto" reads `path` as (see the module)."""
    name = os.path.basename(path)
    if ".xml" in name:
        return "wikipedia"
    if name.endswith(".jsonl"):
        return "jsonl"
    lines = [line.strip() for _, line in numbered_lines(path)]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "bert" if "" in lines else "text"


def read_corpus(path: str, corpus_format: str = "auto") -> list:
    """Documents (lists of sentences) of `path` in `corpus_format` (one of `CORPUS_FORMATS`);
    logs the format read, and how many documents and sentences it gave."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"No corpus file at {path}.")
    if corpus_format not in CORPUS_FORMATS:
        raise ValueError(f"Unknown corpus format {corpus_format!r}; known: {', '.join(CORPUS_FORMATS)}.")
    chosen = corpus_format_of(path) if corpus_format == "auto" else corpus_format
    documents = _READERS[chosen](path)
    if not documents:
        raise ValueError(f"{path} holds no text (read as format {chosen!r}); nothing to pretrain on.")
    how = f"format {chosen!r}" + (" (auto)" if corpus_format == "auto" else "")
    logger.info(f"{path}: {len(documents)} documents, {sum(map(len, documents))} sentences ({how})")
    if len(documents) == 1:
        logger.warning(
            f"{path} reads as a single document ({how}): next-sentence and sentence-order pairs have no "
            "other document to draw from. Pass --corpus_format text if each line is a document."
        )
    return documents
