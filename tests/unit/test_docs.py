"""The reference pages say what the code does: every flag of every verb is in that verb's section of
docs/cli.md, every config key is in docs/config.md's tables with the code's own default, and every ``ordo``
command shown in the README's and the docs' code blocks uses a verb and flags that exist (and, for ``ordo
train``, settings that make a valid config)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
import shlex
from pathlib import Path

import pytest

import ordo
import ordo.methods  # registers the methods whose options the shown commands set
from ordo.cli import build_parser, train_settings
from ordo.config import DecodeConfig, ExperimentConfig, ModelConfig, TrainConfig, build_config
from ordo.data.prepare import PrepareConfig
from ordo.errors import ConfigError

ROOT = Path(ordo.__file__).parent.parent
DOCS = ROOT / "docs"
PAGES = ["README.md", *(f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")))]  # pages with shown commands


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The verbs (or sub-verbs) of ``parser`` by name."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def long_flags(parser: argparse.ArgumentParser) -> list[list[str]]:
    """Each option of ``parser`` (help aside) as its long spellings, e.g. ``[["--src", "--test-src"], ...]``."""
    return [[s for s in action.option_strings if s.startswith("--")] for action in parser._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)]


def verb_section(text: str, verb: str) -> str:
    """The part of cli.md under the heading ``## `ordo VERB ...``, up to the next heading of that level."""
    match = re.search(rf"^## `ordo {re.escape(verb)}[ `].*?(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"docs/cli.md has no section for ordo {verb}"
    return match.group(0)


def mentions(section: str, flag: str) -> bool:
    """Whether ``flag`` appears in ``section`` as itself (``--max-len`` is not found in ``--max-len-a``)."""
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", section) is not None


def undocumented_flags() -> list[str]:
    """``ordo VERB [SUB] --flag`` for every option that its verb's section of cli.md never names."""
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    missing = []
    for verb, parser in subparsers(build_parser()).items():
        section = verb_section(text, verb)
        commands = {verb: parser} | {f"{verb} {sub}": p for sub, p in subparsers(parser).items()}
        for command, command_parser in commands.items():
            missing += [f"ordo {command} {spellings[0]}" for spellings in long_flags(command_parser)
                        if not any(mentions(section, flag) for flag in spellings)]
    return missing


def documented_defaults() -> dict[str, str]:
    """``key -> default`` as config.md's tables write them: ``| `key` | `default` | meaning |`` rows."""
    text = (DOCS / "config.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `([\w.]+)` \| `([^`]*)` \|", text, re.MULTILINE))


def field_default(field: dataclasses.Field) -> object:
    """A dataclass field's default value, from its factory where it has one."""
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def config_fields() -> dict[str, object]:
    """Every key a run's or ``ordo prepare``'s config takes, as config.md names it, with its default."""
    keys = {f.name: field_default(f) for f in dataclasses.fields(PrepareConfig) if f.name != "lattice"}
    for section, config in (("model", ModelConfig), ("train", TrainConfig), ("decode", DecodeConfig)):
        keys |= {f"{section}.{f.name}": field_default(f) for f in dataclasses.fields(config)}
    return keys


def test_every_flag_of_every_verb_is_in_its_section_of_cli_md() -> None:
    assert undocumented_flags() == []


def test_the_flag_check_finds_a_flag_the_page_leaves_out() -> None:
    section = "## `ordo translate --model RUN_DIR [--max-len-a A]`\n"
    assert mentions(section, "--max-len-a") and mentions(section, "--model")
    assert not mentions(section, "--max-len")


@pytest.mark.parametrize("key", sorted(config_fields()))
def test_every_config_key_is_in_config_md_with_the_code_default(key: str) -> None:
    documented = documented_defaults()
    assert key in documented, f"docs/config.md has no row for {key}"
    default = config_fields()[key]
    written = ast.literal_eval(documented[key])
    assert written == default or (isinstance(default, tuple) and list(default) == written), (
        f"docs/config.md gives {key} the default {documented[key]}, the code {default!r}")


def test_the_top_level_keys_of_a_run_are_in_config_md() -> None:
    text = (DOCS / "config.md").read_text(encoding="utf-8")
    for field in dataclasses.fields(ExperimentConfig):
        assert f"`{field.name}`" in text, f"docs/config.md never names the top-level key {field.name}"


def shown_commands(text: str) -> list[str]:
    """The ``ordo VERB ...`` commands of a markdown page's code blocks, continuation lines joined, spaces
    collapsed: at the start of a line, after a pipe, or as ``python -m ordo`` / ``torchrun ... -m ordo``."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    commands = (re.search(r"(?:^|-m |[|&;] *)(ordo [a-z-]+.*)", " ".join(line.split())) for line in lines)
    return [command.group(1) for command in commands if command]


def unknown_in_shown_commands(page: Path) -> list[str]:
    """Each shown command of ``page`` whose verb, or one of whose ``--flags``, the parser does not know."""
    verbs = subparsers(build_parser())
    unknown = []
    for command in shown_commands(page.read_text(encoding="utf-8")):
        verb = command.split()[1]
        if verb not in verbs:
            unknown.append(f"{page.name}: {command}")
            continue
        known = {flag for p in [verbs[verb], *subparsers(verbs[verb]).values()] for flags in long_flags(p)
                 for flag in flags} | {"--help"}
        used = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", command.split("#")[0])
        unknown += [f"{page.name}: {command} ({flag})" for flag in used if flag not in known]
    return unknown


@pytest.mark.parametrize("page", PAGES)
def test_every_shown_ordo_command_uses_a_verb_and_flags_that_exist(page: str) -> None:
    assert unknown_in_shown_commands(ROOT / page) == []


def test_the_command_check_finds_a_misspelt_flag(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nordo translate --model runs/x \\\n    --beem 4 < in > out   # --beam 4\n"
                    "ordo translat --model runs/x\n```\n", encoding="utf-8")
    assert unknown_in_shown_commands(page) == [
        "page.md: ordo translate --model runs/x --beem 4 < in > out # --beam 4 (--beem)",
        "page.md: ordo translat --model runs/x"]


def shown_train_configs(page: Path) -> list[tuple[str, dict]]:
    """Each shown ``ordo train`` command of ``page`` with the raw config its arguments make (parsed as ``ordo``
    parses them, :func:`ordo.cli.training.train_settings`)."""
    return [(command, train_settings(build_parser().parse_args(shlex.split(command, comments=True)[1:])))
            for command in shown_commands(page.read_text(encoding="utf-8")) if command.startswith("ordo train ")]


@pytest.mark.parametrize("page", PAGES)
def test_every_shown_train_command_sets_a_valid_config(page: str) -> None:
    for command, raw in shown_train_configs(ROOT / page):
        build_config(raw, command)  # raises ConfigError naming a key or value the code does not take


def test_the_config_check_finds_a_misspelt_setting(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nordo train --data D --out R --set 'model.methods.reorder_emb.variant=bth'\n```\n",
                    encoding="utf-8")
    (command, raw), = shown_train_configs(page)
    with pytest.raises(ConfigError, match="bth"):
        build_config(raw, command)


def method_rows() -> dict[str, str]:
    """methods.md's table of options: each method name of a row's first cell -> the row's options cell."""
    text = (DOCS / "methods.md").read_text(encoding="utf-8")
    table = text.split("| key | options: type (default) |\n")[1].split("\n\n")[0]
    rows = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| (.*) \|$", table, re.MULTILINE)
    return {name: options for names, options in rows for name in re.findall(r"`(\w+)`", names)}


@pytest.mark.parametrize("name", sorted(ordo.methods.METHODS))
def test_every_method_option_is_in_the_options_table_of_methods_md(name: str) -> None:
    options = method_rows().get(name)
    assert options is not None, f"docs/methods.md's table of options has no row for {name}"
    fields = [f.name for f in dataclasses.fields(ordo.methods.METHODS[name].config_class)]
    assert [f for f in fields if f"`{f}`" not in options] == []
    assert fields or options.startswith("none"), f"docs/methods.md gives {name} options it does not take"
