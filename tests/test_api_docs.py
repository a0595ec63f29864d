"""The API reference (`make docs`, pdoc) builds, and every public name in it has a docstring."""

import importlib

import pdoc
import pdoc.doc
import pytest

# The public packages and modules a user imports from; their members are what `__all__` lists
# (or, without one, every name not starting with "_").
PUBLIC = (
    "bertlayers.layers",
    "bertlayers.networks",
    "bertlayers.models",
    "bertlayers.convert",
    "bertlayers.export",
    "bertlayers.tasks",
    "bertlayers.tokenizers",
    "bertlayers.training",
    "bertlayers.metrics",
    "bertlayers.families.electra",
    "bertlayers.families.elmo",
    "bertlayers.families.spanbert",
    "bertlayers.families.xlnet",
    "bertlayers.runs.pretraining",
    "bertlayers.runs.finetuning",
    "bertlayers.runs.finetuning_config",
    "bertlayers.runs.restarts",
    "bertlayers.runs.output_folder",
    "bertlayers.utils.atomic_files",
    "bertlayers.utils.validation",
    "bertlayers.utils.cli",
)
# Keras's own protocol: the layer's docstring says what `call` takes and returns, with shapes.
KERAS_PROTOCOL = {
    "build",
    "call",
    "compute_output_shape",
    "compute_output_spec",
    "get_config",
    "from_config",
    "compute_loss",
    "compute_metrics",
    "train_step",
    "test_step",
}


def undocumented(module_name):
    module = pdoc.doc.Module(importlib.import_module(module_name))
    missing = []
    for member in module.members.values():
        if member.name.startswith("_") or not isinstance(member, (pdoc.doc.Class, pdoc.doc.Function)):
            continue
        if not member.docstring.strip():
            missing.append(member.fullname)
        if isinstance(member, pdoc.doc.Class):
            missing += [
                method.fullname
                for method in member.own_members
                if isinstance(method, pdoc.doc.Function)
                and not method.name.startswith("_")
                and method.name not in KERAS_PROTOCOL
                and not method.docstring.strip()
            ]
    return missing


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_public_name_has_a_docstring(module_name):
    assert undocumented(module_name) == []


def test_every_layer_docstring_gives_shapes():
    import bertlayers.layers

    vague = [
        name
        for name in bertlayers.layers.__all__
        if name[0].isupper() and "[" not in getattr(bertlayers.layers, name).__doc__
    ]
    assert vague == [], "layers whose docstring shows no shape ([batch, ...])"


@pytest.mark.slow
def test_the_reference_builds(tmp_path):
    """Without a warning (a name pdoc cannot resolve, a docstring it cannot parse), with the
    quickstart and the guides on its index page."""
    import warnings

    pdoc.render.configure(docformat="google")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc("bertlayers", output_directory=tmp_path)
    ours = [str(w.message) for w in caught if "bertlayers" in str(w.message) or "pdoc" in w.filename]
    assert ours == [], ours
    index = (tmp_path / "bertlayers.html").read_text()
    assert "Quickstart" in index and "docs/fine-tuning.md" in index
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    assert {"bertlayers/layers.html", "bertlayers/export.html", "bertlayers/families/xlnet.html"} <= pages
    assert "TransformerEncoderBlock" in (tmp_path / "bertlayers" / "layers.html").read_text()
    assert "RelativeAttention" in (tmp_path / "bertlayers" / "families" / "xlnet.html").read_text()
    assert "BertEncoder" in (tmp_path / "bertlayers" / "families" / "bert.html").read_text()


TYPED = [
    "bertlayers.layers",
    "bertlayers.networks",
    "bertlayers.models",
    "bertlayers.convert",
    "bertlayers.export",
    "bertlayers.tasks",
    "bertlayers.training",
    "bertlayers.tokenizers",
    "bertlayers.runs.pretraining",
    "bertlayers.runs.finetuning",
    "bertlayers.runs.finetuning_config",
    "bertlayers.runs.restarts",
    "bertlayers.runs.retrieval",
    "bertlayers.runs.output_folder",
]


@pytest.mark.parametrize("module_name", TYPED)
def test_the_public_api_is_typed(module_name):
    """Every public function and constructor names the types of its arguments (and a function its
    result); `*args` and `**kwargs` passed on to Keras are left as they are."""
    import inspect

    module = importlib.import_module(module_name)
    untyped = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            if "__init__" not in obj.__dict__ or not inspect.isfunction(obj.__init__):
                continue
            function, needs_return = obj.__init__, False
        elif inspect.isfunction(obj):
            function, needs_return = obj, True
        else:
            continue
        signature = inspect.signature(function)
        for parameter in signature.parameters.values():
            if parameter.name in ("self", "cls") or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if parameter.annotation is parameter.empty:
                untyped.append(f"{name}({parameter.name})")
        if needs_return and signature.return_annotation is signature.empty:
            untyped.append(f"{name} -> ?")
    assert untyped == [], f"untyped in {module_name}"


# The entry points whose docstrings carry an example a user copies: run as doctests.
DOCTESTED = (
    "bertlayers.convert.loading",
    "bertlayers.convert.saving",
    "bertlayers.tasks.text_classifier",
    "bertlayers.tasks.text_tagger",
)


@pytest.mark.slow(reason="the docstrings' examples fine-tune and export")
@pytest.mark.parametrize("module_name", DOCTESTED)
def test_the_docstring_examples_run(module_name, tmp_path, monkeypatch):
    import doctest

    monkeypatch.chdir(tmp_path)  # what an example writes lands here
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, result
