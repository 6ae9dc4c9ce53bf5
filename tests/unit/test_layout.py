"""The package layout: no import cycle among the parts of any package of ordo/ (issue 27), lazy imports
inside functions included; the data side imports nothing above it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import ordo

ROOT = Path(ordo.__file__).parent


def module_name(path: Path) -> str:
    """``ordo/data/lattice/graph.py`` -> ``ordo.data.lattice.graph``; a package's __init__ is the package."""
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def imported_modules(path: Path) -> set[str]:
    """Every ``ordo.*`` name a file imports, at any depth of the file (``from A import b`` gives A and A.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name.startswith("ordo.")}


def part_graphs(modules: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """For each package, the imports among its direct parts: package -> part -> parts it imports."""
    graphs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for source, targets in modules.items():
        for target in targets:
            common = 0
            source_parts, target_parts = source.split("."), target.split(".")
            while common < min(len(source_parts), len(target_parts)) and source_parts[common] == target_parts[common]:
                common += 1
            if common < len(source_parts) and common < len(target_parts):
                package = ".".join(source_parts[:common])
                graphs[package][source_parts[common]].add(target_parts[common])
    return graphs


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of a directed graph as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt, node]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def ordo_modules() -> dict[str, set[str]]:
    return {module_name(path): imported_modules(path) for path in ROOT.rglob("*.py")}


def test_no_package_of_ordo_has_an_import_cycle_among_its_parts():
    cycles = {package: find_cycle(graph) for package, graph in part_graphs(ordo_modules()).items()}
    assert {package: cycle for package, cycle in cycles.items() if cycle} == {}


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import(tmp_path):
    modules = {"ordo.data.prepare": {"ordo.config"}, "ordo.config": {"ordo.errors"},
               "ordo.data.textio": {"ordo.errors"}}
    assert find_cycle(part_graphs(modules)["ordo"]) is None
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from ordo.data.prepare import prepare\n")
    modules["ordo.config"] |= imported_modules(lazy)
    assert find_cycle(part_graphs(modules)["ordo"]) == ["config", "data", "config"]


def test_the_data_side_imports_no_model_method_or_training_code():
    upward = ("ordo.models", "ordo.methods", "ordo.training", "ordo.decoding", "ordo.api", "ordo.build",
              "ordo.config", "ordo.analysis", "ordo.evaluation")
    data = {name: sorted(t for t in targets if t.startswith(upward))
            for name, targets in ordo_modules().items() if name.startswith("ordo.data")}
    assert {name: targets for name, targets in data.items() if targets} == {}
