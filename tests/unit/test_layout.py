"""The package layout: no import cycle among the parts of any package of ordo/ (issue 27), lazy imports
inside functions included; the data side imports nothing above it; loading a run for translation imports
nothing from ordo.training (issue 42). The experiment code (recipes/, bench/) is two packages too: their
modules import each other by module path, without a cycle; ordo imports neither, recipes/ not bench/."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import ordo

ROOT = Path(ordo.__file__).parent
EXPERIMENTS = ("recipes", "bench")  # the experiment packages beside ordo/, above it, bench/ above recipes/


def module_name(path: Path) -> str:
    """``ordo/data/lattice/graph.py`` -> ``ordo.data.lattice.graph``; a package's __init__ is the package."""
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def absolute_imports(path: Path) -> set[str]:
    """Every name a file imports absolutely, at any depth of the file (``from A import b`` gives A and A.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def imported_modules(path: Path, packages: tuple[str, ...] = ("ordo",)) -> set[str]:
    """Every name of the ``packages`` (``ordo.*`` by default) a file imports, at any depth of the file."""
    return {name for name in absolute_imports(path) if name.startswith(tuple(f"{p}." for p in packages))}


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


def translation_imports(path: Path, names: set[str]) -> set[str]:
    """The ``ordo.*`` names the module at ``path`` imports when it is imported (its top-level statements, but
    not what an ``if TYPE_CHECKING:`` block imports for annotations) and when its top-level functions or
    classes ``names`` run."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in names:
            continue
        module = ast.Module(body=[node], type_ignores=[])
        for inner in ast.walk(module):
            if isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                found |= {inner.module} | {f"{inner.module}.{alias.name}" for alias in inner.names}
            elif isinstance(inner, ast.Import):
                found |= {alias.name for alias in inner.names}
    return {name for name in found if name.startswith("ordo.")}


def import_closure(start: set[str], modules: dict[str, set[str]]) -> set[str]:
    """Every module of ``modules`` that importing ``start`` may load: the packages above each module
    imported, and what each module loaded imports at any depth (lazy imports too, so that no code path of
    what is reached escapes)."""

    def with_packages(name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:end]) for end in range(1, len(parts) + 1)} & modules.keys()

    reached: set[str] = set()
    todo = [module for name in start for module in with_packages(name)]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += [found for name in modules[module] for found in with_packages(name)]
    return reached


def test_loading_a_run_for_translation_reaches_no_training_module():
    start = translation_imports(ROOT / "api.py", {"load_run", "LoadedRun"})
    reached = import_closure(start, ordo_modules())
    assert "ordo.decoding.translator" in reached and "ordo.checkpoint" in reached
    assert sorted(name for name in reached if name.startswith("ordo.training")) == []


def test_the_closure_follows_lazy_imports_and_skips_annotations_and_other_functions(tmp_path):
    source = tmp_path / "api.py"
    source.write_text("from typing import TYPE_CHECKING\nfrom ordo.a import f\nif TYPE_CHECKING:\n"
                      "    from ordo.training.trainer import Progress\n"
                      "def train():\n    from ordo.training.trainer import Trainer\n"
                      "def load_run():\n    from ordo.c import g\n", encoding="utf-8")
    assert translation_imports(source, {"load_run"}) == {"ordo.a", "ordo.a.f", "ordo.c", "ordo.c.g"}
    modules = {"ordo": set(), "ordo.a": set(), "ordo.c": {"ordo.d"}, "ordo.d": {"ordo.training.optim.set_lr"},
               "ordo.training": set(), "ordo.training.optim": set(), "ordo.training.trainer": set()}
    assert import_closure({"ordo.a.f"}, modules) == {"ordo", "ordo.a"}
    assert import_closure({"ordo.c.g"}, modules) == {"ordo", "ordo.c", "ordo.d", "ordo.training",
                                                     "ordo.training.optim"}


def test_a_process_that_loads_a_run_and_translates_has_loaded_no_training_module(trained_run):
    script = ("import sys\nfrom ordo import api\nrun = api.load_run(sys.argv[1], 'last')\n"
              "run.translate(['a b c'])\n"
              "print(sorted(name for name in sys.modules if name.startswith('ordo.training')))")
    done = subprocess.run([sys.executable, "-c", script, str(trained_run)], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def experiment_files(package: str) -> list[Path]:
    """The Python files of an experiment package (a folder beside ordo/), its subfolders' included."""
    return sorted((ROOT.parent / package).rglob("*.py"))


def test_no_experiment_package_has_an_import_cycle_among_its_parts():
    modules = {module_name(path): imported_modules(path, EXPERIMENTS) for package in EXPERIMENTS
               for path in experiment_files(package)}
    assert "recipes.compare" in modules["recipes.replicate"]  # the graph holds their imports of each other
    assert "bench.machine" in modules["bench.peers"] and "bench.gpu.flops" in modules["bench.gpu.speed_table"]
    cycles = {package: find_cycle(graph) for package, graph in part_graphs(modules).items()}
    assert {package: cycle for package, cycle in cycles.items() if cycle} == {}


def test_the_experiment_code_imports_its_own_modules_by_module_path_only():
    stems = {path.stem for package in EXPERIMENTS for path in experiment_files(package)} - {"__init__"}
    bare = {str(path.relative_to(ROOT.parent)): sorted(name for name in absolute_imports(path)
                                                        if name.split(".")[0] in stems)
            for package in EXPERIMENTS for path in experiment_files(package)}
    assert {path: names for path, names in bare.items() if names} == {}


def test_ordo_imports_no_experiment_code():
    upward = {module_name(path): sorted(imported_modules(path, EXPERIMENTS)) for path in ROOT.rglob("*.py")}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def test_recipes_import_no_benchmark_code():
    upward = {module_name(path): sorted(imported_modules(path, ("bench",))) for path in experiment_files("recipes")}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def imports_an_experiment_module(node: ast.stmt) -> bool:
    """Whether ``node``, at any depth (a function's lazy imports too), imports from an experiment package."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
            names = [inner.module]
        elif isinstance(inner, ast.Import):
            names = [alias.name for alias in inner.names]
        else:
            continue
        if any(name.split(".")[0] in EXPERIMENTS for name in names):
            return True
    return False


def test_a_script_that_imports_its_package_puts_the_repository_root_first_on_the_path():
    """Run as ``python bench/NAME.py``, a script's own folder comes first on the path: its imports by module
    path hold only after its top-level ``if not __package__:`` puts the repository root there instead."""
    late = []
    for path in (path for package in EXPERIMENTS for path in experiment_files(package)):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        script = any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in body)
        first = next((index for index, node in enumerate(body) if imports_an_experiment_module(node)), None)
        root = next((index for index, node in enumerate(body)
                     if isinstance(node, ast.If) and ast.unparse(node.test) == "not __package__"), len(body))
        if script and first is not None and root > first:
            late.append(str(path.relative_to(ROOT.parent)))
    assert late == []
