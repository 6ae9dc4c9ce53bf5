"""Every shipped recipe config loads under the strict schema, and every recipe script parses."""

import subprocess
from pathlib import Path

import pytest

from ordo.config import build_config, from_dict, read_yaml
from ordo.prepare import PrepareConfig

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/train.yaml")), ids=lambda p: p.parent.name)
def test_train_config_loads(path):
    cfg = build_config(read_yaml(path), str(path))
    assert cfg.train.max_tokens > 0 and cfg.decode.beam_size >= 1


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/prepare.yaml")), ids=lambda p: p.parent.name)
def test_prepare_config_loads(path):
    assert from_dict(PrepareConfig, read_yaml(path), str(path)).vocab_size > 0


@pytest.mark.parametrize("path", sorted(RECIPES.glob("**/*.sh")), ids=lambda p: str(p.relative_to(RECIPES)))
def test_recipe_script_parses(path):
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_every_recipe_has_its_configs():
    recipes = [p.parent for p in RECIPES.glob("*/run.sh")]
    assert recipes
    for recipe in recipes:
        assert (recipe / "train.yaml").exists() and (recipe / "prepare.yaml").exists(), recipe
