"""The named training budgets of the paper-scale recipes and verdict suites (issue 43).

A budget is a run's schedule: its updates, tokens per update (``max_tokens`` per batch x ``update_freq`` batches
accumulated), warm-up updates and the checkpoints averaged at the end. A paper-scale recipe's ``budgets.yaml``,
beside its train.yaml, names its budgets; the verdict suite of the corpus points at that file (suite.yaml's
``budgets``), so that a recipe and its verdicts train to one schedule. Two are first-class:

- ``paper`` (the default, :data:`DEFAULT`): the schedule the papers trained their claims with on the corpus,
  e.g. 300,000 updates of 4,096 x 8 tokens with 8,000 warm-up updates on WMT14 En-De (paper 000, §5.3 "System
  Setting"; paper 004, §5.2 "Settings"); on KFTT, no paper's corpus, paper 000's ASPEC schedule with its updates
  scaled to as many passes over the corpus (recipes/kftt_jaen/budgets.yaml);
- ``short``: a cheaper schedule (on WMT14, Vaswani et al. 2017's Transformer-base one: 100,000 updates of ~25k
  tokens, 4,000 warm-up), between a half and a quarter of the paper's tokens (KFTT: 0.23): a claim tested on it
  is not tested at the paper's scale.

``replicate.py run|pending|queue --budget NAME``, ``compare.py --budget NAME`` and ``recipes/RECIPE/run.sh
--budget NAME`` pick one. A suite or recipe without budgets (the CPU suites, IWSLT14) has one schedule: its
suite.yaml's ``steps`` (a recipe: its train.yaml's ``max_steps``) over its train.yaml's batch and warm-up.

usage: python recipes/budgets.py recipes/wmt14_ende                  # its budgets, one a line
       python recipes/budgets.py recipes/wmt14_ende short --shell    # shell assignments, for recipes/lib.sh
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as `python recipes/NAME.py`: the repository root, not recipes/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ordo.choices import did_you_mean
from ordo.config import build_config
from ordo.data.textio import read_yaml
from ordo.errors import ConfigError

DEFAULT = "paper"  # the issue asks for the papers' schedule: a claim "at the paper's scale" trains to it
FIELDS = ("steps", "max_tokens", "update_freq", "warmup_steps", "average_last")
SINGLE_AVERAGE = 4  # checkpoints averaged by a recipe without budgets (recipes/lib.sh) or a suite that names none


@dataclass(frozen=True)
class Budget:
    """A run's schedule: ``steps`` updates of ``max_tokens`` x ``update_freq`` tokens (the longer side of each
    padded pair), ``warmup_steps`` of linear warm-up, the last ``average_last`` checkpoints averaged. ``name``
    is None for the one schedule of a suite or recipe without budgets."""

    name: str | None
    steps: int
    max_tokens: int
    update_freq: int
    warmup_steps: int
    average_last: int

    @property
    def tokens_per_update(self) -> int:
        """Tokens per update on one GPU: ``max_tokens`` x ``update_freq``."""
        return self.max_tokens * self.update_freq

    @property
    def schedule_overrides(self) -> list[str]:
        """The ``ordo train`` overrides of its batch and warm-up; the updates go on their own (``train.max_steps``),
        since a trial replaces them."""
        return [f"train.max_tokens={self.max_tokens}", f"train.update_freq={self.update_freq}",
                f"train.warmup_steps={self.warmup_steps}"]

    @property
    def settings(self) -> dict[str, object]:
        """What a run records of it (replicate.py's settings file)."""
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        return f"{self.steps:,} updates x {self.tokens_per_update:,} tokens"


def read_budgets(path: Path) -> dict[str, Budget]:
    """The budgets of a budgets.yaml: name -> its :data:`FIELDS`, each a positive integer.

    Raises:
        ConfigError: names ``path``, the budget and the key that is unknown, missing or not a positive integer.
    """
    raw = read_yaml(path)
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{path}: expected a mapping of budget names to {{{', '.join(FIELDS)}}}")
    return {str(name): parse_budget(path, str(name), fields) for name, fields in raw.items()}


def parse_budget(path: Path, name: str, fields: object) -> Budget:
    """Budget ``name`` of ``path`` from its ``fields`` mapping, checked as :func:`read_budgets` says."""
    if not isinstance(fields, dict):
        raise ConfigError(f"{path}: {name}: expected a mapping with {', '.join(FIELDS)}")
    unknown = sorted(set(fields) - set(FIELDS))
    missing = [key for key in FIELDS if key not in fields]
    problems = [f"unknown key {key}{did_you_mean(key, FIELDS)}" for key in unknown]
    problems += [f"missing {', '.join(missing)}"] if missing else []
    if problems:
        raise ConfigError(f"{path}: {name}: {'; '.join(problems)} (a budget has {', '.join(FIELDS)})")
    bad = [key for key in FIELDS if type(fields[key]) is not int or fields[key] < 1]  # bool is no count
    if bad:
        raise ConfigError(f"{path}: {name}: {', '.join(bad)}: expected a positive integer")
    return Budget(name, **{key: fields[key] for key in FIELDS})


def budgets_file(folder: Path) -> Path | None:
    """The budgets.yaml a recipe or suite folder trains to: the one a suite's suite.yaml names (``budgets``,
    relative to the suite), else a recipe's beside its train.yaml; None without one."""
    suite = folder / "suite.yaml"
    named = read_yaml(suite).get("budgets") if suite.is_file() else None
    if named:
        return (folder / str(named)).resolve()
    own = folder / "budgets.yaml"
    return own if own.is_file() and not suite.is_file() else None


def single_budget(folder: Path) -> Budget:
    """The one schedule of a folder without budgets: a suite's suite.yaml ``steps`` and ``average_last`` (default
    :data:`SINGLE_AVERAGE`), a recipe's train.yaml ``max_steps``, over its train.yaml's batch and warm-up."""
    train = build_config(read_yaml(folder / "train.yaml"), str(folder / "train.yaml")).train
    spec = read_yaml(folder / "suite.yaml") if (folder / "suite.yaml").is_file() else {}
    return Budget(None, int(spec.get("steps", train.max_steps)), train.max_tokens, train.update_freq,
                  train.warmup_steps, int(spec.get("average_last", SINGLE_AVERAGE)))


def folder_budgets(folder: Path) -> list[Budget]:
    """Every budget of a recipe or suite folder, in its file's order; its one schedule where it has none."""
    path = budgets_file(folder)
    return list(read_budgets(path).values()) if path else [single_budget(folder)]


def folder_budget(folder: Path, name: str | None = None) -> Budget:
    """Budget ``name`` (None: :data:`DEFAULT`) of a recipe or suite folder; a folder without budgets has its one
    schedule, asked for without a name.

    Raises:
        ConfigError: the folder's budgets.yaml has no budget ``name`` (naming the file and its budgets), or the
            folder has no budgets and ``name`` is given.
    """
    path = budgets_file(folder)
    if path is None:
        if name is not None:
            raise ConfigError(f"{folder}: no budgets.yaml (nor suite.yaml's budgets): it trains to one schedule, "
                              f"asked for without a budget name, not {name!r}")
        return single_budget(folder)
    budgets = read_budgets(path)
    chosen = name or DEFAULT
    if chosen not in budgets:
        raise ConfigError(f"{path}: no budget {chosen!r}{did_you_mean(chosen, budgets)}; its budgets: "
                          f"{', '.join(budgets)}")
    return budgets[chosen]


def has_budgets(folder: Path) -> bool:
    """Whether a recipe or suite folder names budgets (a budgets.yaml)."""
    return budgets_file(folder) is not None


def shell_assignments(budget: Budget) -> str:
    """``budget`` as bash assignments for recipes/lib.sh: ``budget`` (its name), ``average_last`` and
    ``budget_sets`` (an array of ``--set`` overrides: updates, batch and warm-up)."""
    sets = [f"train.max_steps={budget.steps}", *budget.schedule_overrides]
    words = " ".join(f"--set {shlex.quote(item)}" for item in sets)
    return f"budget={shlex.quote(budget.name or '')} average_last={budget.average_last} budget_sets=({words})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a recipe or suite folder, e.g. recipes/wmt14_ende")
    parser.add_argument("name", nargs="?", help=f"a budget (default: {DEFAULT}); with --shell only")
    parser.add_argument("--shell", action="store_true", help="print the budget as bash assignments (lib.sh)")
    args = parser.parse_args()
    try:
        if args.shell:
            print(shell_assignments(folder_budget(args.folder, args.name)))
        else:
            print("".join(f"{budget.name or '-'}: {budget}, warm-up {budget.warmup_steps:,}, last "
                          f"{budget.average_last} checkpoints averaged\n" for budget in folder_budgets(args.folder)),
                  end="")
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
