"""The package diagram: every import of a bertlayers package points down the tiers, never up,
and no two packages import each other (checked on the source, lazy imports inside functions
included). `python tests/test_layering.py` prints the graph."""

import ast
import collections
import os

# Bottom to top: a package may import only the packages before it.
TIERS = (
    "utils",
    "metrics",
    "layers",
    "networks",
    "models",
    "tokenizers",
    "pretraining_data",
    "task_data",
    "convert",
    "families",
    "export",
    "training",
    "tasks",
    "runs",
)
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bertlayers")
# The package's own __init__ (it imports everything to register the serializable classes) and the
# shared test checks stand outside the tiers; the start-up and backend modules are below them all.
OUTSIDE = {"__init__", "startup", "backend", "testing"}
BELOW_ALL = ("startup", "backend")


def package_imports():
    """{(from package, to package): ["module:line", ...]} for every import across packages."""
    edges = collections.defaultdict(list)
    for folder, _, files in os.walk(ROOT):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)
            source = parts[0]
            if source in OUTSIDE:
                continue
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                modules = []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules = [node.module]
                elif isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                for module in modules:
                    pieces = module.split(".")
                    if pieces[0] == "bertlayers" and len(pieces) > 1 and pieces[1] != source:
                        edges[(source, pieces[1])].append(f"{'/'.join(parts)}.py:{node.lineno}")
    return edges


def test_every_package_is_in_a_tier():
    packages = {n for n in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, n, "__init__.py"))}
    packages -= OUTSIDE
    assert packages == set(TIERS), (
        f"place {sorted(packages - set(TIERS))} in TIERS (or drop {sorted(set(TIERS) - packages)})"
    )


def test_imports_point_down_the_tiers_and_make_no_cycle():
    upward = [
        f"{source} -> {target} ({', '.join(places)})"
        for (source, target), places in sorted(package_imports().items())
        if target not in BELOW_ALL and (target in OUTSIDE or TIERS.index(target) > TIERS.index(source))
    ]
    assert not upward, "imports up the tiers (a cycle in the making):\n" + "\n".join(upward)


def test_the_modules_below_the_tiers_import_nothing_of_ours():
    for module in BELOW_ALL:
        tree = ast.parse(open(os.path.join(ROOT, f"{module}.py"), encoding="utf-8").read())
        ours = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("bertlayers")
            or isinstance(node, ast.Import)
            and any(a.name.startswith("bertlayers") for a in node.names)
        ]
        assert not ours, f"{module}.py imports bertlayers at lines {ours}: it must stay below every tier"


# The core tiers build every family from parts; a family's name in their code (not in a docstring
# or comment citing where a design comes from) would be a family's knowledge in the core.
CORE = ("layers", "networks")
FAMILIES = ("albert", "roberta", "distilbert", "electra", "spanbert", "xlnet", "deberta", "modernbert")


def family_mentions(package):
    """["module:line name"] for each identifier or string (docstrings aside) naming a family."""
    found = []
    folder = os.path.join(ROOT, package)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(folder, name), encoding="utf-8").read())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                text = node.name
            else:
                continue
            if any(family in text.lower() for family in FAMILIES):
                found.append(f"{package}/{name}:{node.lineno} {text[:60]!r}")
    return found


def test_the_core_tiers_name_no_family():
    found = [mention for package in CORE for mention in family_mentions(package)]
    assert not found, "family names in the core tiers:\n" + "\n".join(found)


def layer_module_users():
    """{module of bertlayers/layers: the places of the library that import it}, a place being a
    family's folder (`families/xlnet`) or another package (`networks`); `bertlayers.layers`'s own
    re-exports are followed to the module that defines each name."""
    layers = os.path.join(ROOT, "layers")
    modules = {name[: -len(".py")] for name in os.listdir(layers) if name.endswith(".py") and name != "__init__.py"}
    defined_in = {}  # name re-exported by bertlayers.layers -> its module
    for node in ast.walk(ast.parse(open(os.path.join(layers, "__init__.py"), encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bertlayers.layers."):
            defined_in.update({alias.name: node.module.split(".")[2] for alias in node.names})
    users = {module: set() for module in modules}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".py"):
                continue
            parts = os.path.relpath(os.path.join(folder, name), ROOT)[: -len(".py")].split(os.sep)
            place = "/".join(parts[:2]) if parts[0] == "families" else parts[0]
            for node in ast.walk(ast.parse(open(os.path.join(folder, name), encoding="utf-8").read())):
                used = []
                if isinstance(node, ast.ImportFrom) and node.module == "bertlayers.layers":
                    used = [defined_in.get(alias.name) for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bertlayers.layers."):
                    used = [node.module.split(".")[2]]
                for module in used:
                    if module in users and parts not in (["layers", module], ["layers", "__init__"]):
                        users[module].add(place)
    return users


def test_no_module_of_layers_serves_one_family_only():
    """A layer only one family uses lives in that family's folder."""
    one_family = {
        module: sorted(places)
        for module, places in layer_module_users().items()
        if len(places) == 1 and next(iter(places)).startswith("families/")
    }
    assert not one_family, f"layers used by one family only (move them into its folder): {one_family}"


def test_no_function_is_longer_than_80_lines_of_code():
    """A function a reader can hold: at most 80 lines, its docstring not counted."""
    long = []
    for folder, _, files in os.walk(ROOT):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                lines = node.end_lineno - node.lineno + 1
                first = node.body[0]
                if (
                    isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)
                ):
                    lines -= first.end_lineno - first.lineno + 1
                if lines > 80:
                    long.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "functions over 80 lines of code:\n" + "\n".join(long)


def python_files(*folders):
    """(path, parsed module) of every Python file under `folders` (relative to the repository)."""
    for top in folders:
        for folder, _, files in os.walk(os.path.join(os.path.dirname(ROOT), top)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    yield path, ast.parse(open(path, encoding="utf-8").read())


def test_what_a_model_tokenizes_with_is_asked_not_sniffed():
    """Outside the tokenizers package no code branches on a tokenizer's type (`isinstance`): a
    model's tokenizer is one value (`ModelTokenizer`) that answers for every format."""
    tokenizer_types = {
        node.name
        for _, module in python_files("bertlayers/tokenizers")
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef)
    }
    sniffed = []
    for path, module in python_files("bertlayers", "examples"):
        if os.sep + "tokenizers" + os.sep in path:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                named = {getattr(kind, "id", getattr(kind, "attr", None)) for kind in kinds} & tokenizer_types
                if named:
                    sniffed.append(f"{os.path.relpath(path, os.path.dirname(ROOT))}:{node.lineno} {sorted(named)}")
    assert "ModelTokenizer" in tokenizer_types
    assert not sniffed, "branches on a tokenizer's type outside bertlayers/tokenizers:\n" + "\n".join(sniffed)


def graph_lines():
    """The tiers' import graph, top down: `package -> the packages it imports`."""
    graph = collections.defaultdict(set)
    for source, target in package_imports():
        if target not in BELOW_ALL:  # every tier may use them (`docs/architecture.md`)
            graph[source].add(target)
    return [
        f"{package:9s} -> {', '.join(sorted(graph[package], key=TIERS.index)) or '(nothing of ours)'}"
        for package in reversed(TIERS)
    ]


def test_the_architecture_page_draws_the_graph_the_code_has():
    page = open(os.path.join(os.path.dirname(ROOT), "docs", "architecture.md"), encoding="utf-8").read()
    drawn = page.split("```\n", 2)[1].split("```")[0].splitlines()
    assert drawn == graph_lines(), "docs/architecture.md's graph: `python tests/test_layering.py` prints it"


if __name__ == "__main__":
    print("\n".join(graph_lines()))
