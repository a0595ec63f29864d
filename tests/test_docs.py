"""Every Python block in README.md and docs/*.md runs as written. The blocks of one page share
a namespace, in order, as a reader running them one after another would; a block that needs
what a fresh machine lacks (a Google TF1 checkpoint) is preceded by `<!-- skip: why -->` and
reported skipped under its page and line; one that trains or exports a real model for a minute is
preceded by `<!-- slow: why -->` and left to the full suite (a page's later blocks must not need it)."""

import glob
import os
import re

import pytest
from processes import REPO

BLOCK = re.compile(
    r"(?:<!-- skip: (?P<skip>[^>]*) -->\n)?(?:<!-- slow: (?P<slow>[^>]*) -->\n)?```python\n(?P<code>.*?)^```",
    re.S | re.M,
)
PAGES = [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))


def blocks():
    for page in PAGES:
        text = open(page, encoding="utf-8").read()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            marks = [pytest.mark.slow(reason=match["slow"])] if match["slow"] else []
            yield pytest.param(
                page, line, match["code"], match["skip"], marks=marks, id=f"{os.path.relpath(page, REPO)}:{line}"
            )


_NAMESPACES = {}  # page -> the namespace its blocks run in, its folder and the lines run there


def run_block(page, line, code, tmp_path_factory, monkeypatch):
    if page not in _NAMESPACES:
        _NAMESPACES[page] = ({"__name__": "__docs__"}, str(tmp_path_factory.mktemp("docs")), set())
    namespace, folder, done = _NAMESPACES[page]
    monkeypatch.chdir(folder)  # what a block writes lands in the page's own folder
    exec(compile("\n" * line + code, page, "exec"), namespace)
    done.add(line)
    return namespace


@pytest.mark.parametrize("page, line, code, skip", list(blocks()))
def test_python_block_runs(page, line, code, skip, tmp_path_factory, monkeypatch):
    if skip:
        pytest.skip(skip)
    run_block(page, line, code, tmp_path_factory, monkeypatch)


@pytest.mark.slow(reason="the README's quickstart fine-tunes the real MiniLM (once, with its block's test)")
def test_the_quickstarts_minilm_beats_the_majority_on_reviews_it_never_saw(tmp_path_factory, monkeypatch):
    """The real MiniLM fine-tuned as the README's quickstart does (40 steps) labels the 200
    held-out Rotten Tomatoes reviews at least 10 points above always answering the larger class."""
    readme = PAGES[0]
    namespace = _NAMESPACES.get(readme, ({}, None, set()))[0]
    for param in blocks():  # the page's blocks up to the quickstart, where this test runs alone
        page, line, code, _ = param.values
        if page == readme and "held_out" not in namespace and line not in _NAMESPACES.get(page, ({}, None, set()))[2]:
            namespace = run_block(page, line, code, tmp_path_factory, monkeypatch)
    held_out, predicted = namespace["held_out"], namespace["predicted"]
    gold = [label for _, label in held_out]
    accuracy = sum(p == g for p, g in zip(predicted, gold)) / len(gold)
    majority = max(gold.count(label) for label in set(gold)) / len(gold)
    assert accuracy > majority + 0.1, (accuracy, majority)
