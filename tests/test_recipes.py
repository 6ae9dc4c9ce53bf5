"""Every shipped recipe config loads under the strict schema, and every recipe script parses."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ordo.build import build_model, count_parameters
from ordo.config import build_config, from_dict, merge, parse_overrides, read_yaml
from ordo.prepare import PrepareConfig

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
sys.path.insert(0, str(RECIPES))
import compare  # (recipes/compare.py: how a suite's systems.yaml entries are read)


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/train.yaml")), ids=lambda p: p.parent.name)
def test_train_config_loads(path):
    cfg = build_config(read_yaml(path), str(path))
    assert cfg.train.max_tokens > 0 and cfg.decode.beam_size >= 1


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/prepare*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_prepare_config_loads(path):
    assert from_dict(PrepareConfig, read_yaml(path), str(path)).vocab_size > 0


@pytest.mark.parametrize("path", sorted(RECIPES.glob("**/*.sh")), ids=lambda p: str(p.relative_to(RECIPES)))
def test_recipe_script_parses(path):
    subprocess.run(["bash", "-n", str(path)], check=True)


def suites_of(script: str) -> list[str]:
    """The comparison suites a recipe script runs through recipes/compare.py (``--suite NAME``)."""
    return [suite for suite, _ in compared_systems(script)]


def test_every_recipe_has_its_configs_or_uses_a_comparison_suite():
    recipes = [p.parent for p in RECIPES.glob("*/run.sh")]
    assert recipes
    for recipe in recipes:
        script = (recipe / "run.sh").read_text()
        if "recipe_main" in script:  # trains with its own configs
            assert (recipe / "train.yaml").exists() and (recipe / "prepare.yaml").exists(), recipe
        elif "compare.py" in script:
            suites = suites_of(script)
            assert suites and all((RECIPES / s / "suite.yaml").exists() for s in suites), recipe
        else:  # an analysis recipe (e.g. alignment): it trains nothing
            assert '"$ordo" train' not in script and "usage:" in script, recipe


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/suite.yaml")), ids=lambda p: p.parent.name)
def test_every_suite_names_its_corpus_and_builds_every_system_under_the_strict_schema(path):
    suite = read_yaml(path)
    assert set(suite) >= {"corpus", "src", "tgt", "splits", "steps"} and set(suite["splits"]) == {"train", "valid", "test"}
    base = read_yaml(path.parent / "train.yaml")
    systems = read_yaml(path.parent / "systems.yaml")
    other_names = compare.aliases(systems)
    assert all(target in systems and target not in other_names for target in other_names.values()), other_names
    for name, entry in systems.items():
        if name in other_names:
            continue
        prepare_file, overrides = compare.system_entry(name, entry)
        assert (path.parent / prepare_file).is_file(), (name, prepare_file)
        cfg = build_config(merge(base, parse_overrides(overrides)), f"{path.parent}: {name}")
        assert count_parameters(build_model(cfg.model, 100, 100).model) > 0, name


def compared_systems(script: str) -> list[tuple[str, list[str]]]:
    """(suite, system names) of every ``compare.py`` call in a recipe script (other options and shell words
    such as ``"$@"`` skipped); ``--suite "$VAR"`` stands for each value of a ``for VAR in A B; do`` loop."""
    loops = {name: values.split() for name, values in re.findall(r"for (\w+) in ([\w ]+);", script)}
    calls = []
    for line in script.replace("\\\n", " ").splitlines():
        if "compare.py" not in line or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line.split("compare.py", 1)[1].lstrip("\"'"))
        suite, names, option = "", [], ""
        for word in words:
            if option:
                suite = word if option == "--suite" else suite
                option = ""
            elif word.startswith("--"):
                option = word
            elif not word.startswith("$"):
                names.append(word)
        calls += [(value, names) for value in loops.get(suite.lstrip("$"), [suite])]
    return calls


def test_recipes_name_only_systems_their_suites_define():
    checked = 0
    for script in RECIPES.glob("*/run.sh"):
        for suite, names in compared_systems(script.read_text()):
            systems = read_yaml(RECIPES / suite / "systems.yaml")
            assert names and set(names) <= set(systems), (script, suite, names)
            checked += 1
    assert checked >= 3


def test_an_alias_names_one_system_and_scores_as_a_sweep_point():
    systems = {"h": ["model.preset=rnn-small"], "h_lambda@0.5": {"same_as": "h"}, "h_lambda@0.1": ["x=1"]}
    other_names = compare.aliases(systems)
    assert other_names == {"h_lambda@0.5": "h"}
    assert compare.with_aliases({"h": 3.0, "h_lambda@0.1": 2.0}, other_names) == {
        "h": 3.0, "h_lambda@0.1": 2.0, "h_lambda@0.5": 3.0}
    assert compare.with_aliases({"h_lambda@0.1": 2.0}, other_names) == {"h_lambda@0.1": 2.0}
    assert compare.with_aliases({"h": 3.0}, other_names) == {"h": 3.0}  # no sweep of h_lambda: no point
