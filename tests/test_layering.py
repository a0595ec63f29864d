"""The package diagram: every import of a bertlayers package points down the tiers, never up,
and no two packages import each other (checked on the source, lazy imports inside functions
included). `python tests/test_layering.py` prints the graph."""

import ast
import collections
import os

# Bottom to top: a package may import only the packages before it.
TIERS = ("utils", "metrics", "layers", "networks", "models", "data", "convert", "families", "export", "training", "runs")
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bertlayers")
# The package's own __init__ (it imports everything to register the serializable classes) stands
# outside the tiers; the start-up module (loading TensorFlow where it is needed) is below them all.
OUTSIDE = {"__init__", "startup"}
BELOW_ALL = "startup"


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
    assert packages == set(TIERS), f"place {sorted(packages - set(TIERS))} in TIERS (or drop {sorted(set(TIERS) - packages)})"


def test_imports_point_down_the_tiers_and_make_no_cycle():
    upward = [
        f"{source} -> {target} ({', '.join(places)})"
        for (source, target), places in sorted(package_imports().items())
        if target != BELOW_ALL and (target in OUTSIDE or TIERS.index(target) > TIERS.index(source))
    ]
    assert not upward, "imports up the tiers (a cycle in the making):\n" + "\n".join(upward)


def test_the_start_up_module_imports_nothing_of_ours():
    tree = ast.parse(open(os.path.join(ROOT, f"{BELOW_ALL}.py"), encoding="utf-8").read())
    ours = [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertlayers")
        or isinstance(node, ast.Import) and any(a.name.startswith("bertlayers") for a in node.names)
    ]
    assert not ours, f"{BELOW_ALL}.py imports bertlayers at lines {ours}: it must stay below every tier"


if __name__ == "__main__":
    graph = collections.defaultdict(set)
    for source, target in package_imports():
        if target != BELOW_ALL:  # every tier may use it (`docs/architecture.md`)
            graph[source].add(target)
    for package in reversed(TIERS):
        print(f"{package:9s} -> {', '.join(sorted(graph[package], key=TIERS.index)) or '(nothing of ours)'}")
