"""Every shipped recipe config loads under the strict schema, and every recipe script parses."""

import gzip
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ordo.build import build_model, count_parameters
from ordo.config import build_config, from_dict, merge, parse_overrides
from ordo.data.prepare import PrepareConfig
from ordo.data.textio import read_yaml

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
sys.path.insert(0, str(RECIPES.parent))  # the repository root: the recipes package
from recipes import budgets, compare  # a suite's budgets, how its systems.yaml entries are read


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
        if "recipe_main" in script or "recipe_run" in script:  # trains with its own configs (lib.sh's steps)
            assert (recipe / "train.yaml").exists() and (recipe / "prepare.yaml").exists(), recipe
        elif "compare.py" in script:
            suites = suites_of(script)
            assert suites and all((RECIPES / s / "suite.yaml").exists() for s in suites), recipe
        else:  # an analysis recipe (e.g. alignment): it trains nothing
            assert '"$ordo" train' not in script and "usage:" in script, recipe


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/suite.yaml")), ids=lambda p: p.parent.name)
def test_every_suite_names_its_corpus_and_builds_every_system_under_the_strict_schema(path):
    suite = read_yaml(path)
    assert set(suite) >= {"corpus", "src", "tgt", "splits"} and set(suite["splits"]) == {"train", "valid", "test"}
    assert ("steps" in suite) != ("budgets" in suite), "one schedule, or the budgets file of recipes/budgets.py"
    assert budgets.folder_budgets(path.parent), path
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


def write_corpus(folder: Path, text: str, mtime: float = 0.0) -> dict:
    """A suite spec whose six corpus files in ``folder`` all hold ``text``, gzipped with time ``mtime``."""
    spec = {"src": "de", "tgt": "en", "splits": {"train": "train", "valid": "valid", "test": "test"}}
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        for side in ("de", "en"):
            (folder / f"{split}.{side}.gz").write_bytes(gzip.compress(text.encode(), mtime=mtime))
    return spec


def fake_prepare(monkeypatch, seconds: float = 0.0) -> list[list[str]]:
    """Replace ``ordo prepare`` in compare.py by one that takes ``seconds`` and writes only data.yaml; returns
    the list its calls are recorded in."""
    import time

    calls = []

    def prepare(args):
        calls.append(args)
        time.sleep(seconds)
        (Path(args[args.index("--out") + 1]) / "data.yaml").write_text("{}")
        return 0

    monkeypatch.setattr(compare, "ordo", prepare)
    return calls


def test_a_prepared_data_folder_is_refused_for_another_corpus(tmp_path, monkeypatch):
    calls = fake_prepare(monkeypatch)
    spec = write_corpus(tmp_path / "small", "ein Satz\n")
    out = tmp_path / "work" / "data"
    out.mkdir(parents=True)
    compare.prepare(Path("prepare.yaml"), spec, tmp_path / "small", out)
    write_corpus(tmp_path / "small", "ein Satz\n", mtime=12345.0)  # the same text, gzipped again later
    compare.prepare(Path("prepare.yaml"), spec, tmp_path / "small", out)
    assert len(calls) == 1  # the second call reuses the folder
    write_corpus(tmp_path / "full", "ein Satz\nnoch ein Satz\n")
    with pytest.raises(SystemExit, match="prepared from other corpus files"):
        compare.prepare(Path("prepare.yaml"), spec, tmp_path / "full", out)


def test_a_preparation_that_stopped_part_way_is_done_again_not_reused(tmp_path, monkeypatch):
    calls = fake_prepare(monkeypatch)
    spec = write_corpus(tmp_path / "small", "ein Satz\n")
    out = tmp_path / "work" / "data"
    out.mkdir(parents=True)
    (out / "data.yaml").write_text("{}")  # ordo prepare stopped after data.yaml, before its alignments
    compare.prepare(Path("prepare.yaml"), spec, tmp_path / "small", out)
    assert len(calls) == 1 and (out / compare.CORPUS_STAMP).exists()
    compare.prepare(Path("prepare.yaml"), spec, tmp_path / "small", out)
    assert len(calls) == 1  # finished now: reused


def test_runs_started_side_by_side_prepare_a_folder_once(tmp_path, monkeypatch):
    import threading

    calls = fake_prepare(monkeypatch, seconds=0.3)  # the other run checks meanwhile: without a lock both prepare
    spec = write_corpus(tmp_path / "small", "ein Satz\n")
    out = tmp_path / "work" / "data"
    out.mkdir(parents=True)
    runs = [threading.Thread(target=compare.prepare, args=(Path("prepare.yaml"), spec, tmp_path / "small", out))
            for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert len(calls) == 1


def test_a_run_started_with_other_settings_is_named_not_resumed_or_reused(tmp_path, monkeypatch):
    from ordo.config import save_config

    suite, run_dir = tmp_path / "suite", tmp_path / "runs" / "sys"
    suite.mkdir()
    run_dir.mkdir(parents=True)
    (suite / "train.yaml").write_text("train: {lr: 0.001}\n")
    trained = merge(read_yaml(suite / "train.yaml"), parse_overrides(["data=d", "train.max_steps=10",
                                                                       "train.clip_norm=1.0"]))
    save_config(build_config(trained), run_dir / "config.yaml")
    started = []
    monkeypatch.setattr(compare.api, "train", lambda cfg, run: started.append(cfg))
    monkeypatch.setattr(compare.api, "average", lambda run, last: None)
    with pytest.raises(SystemExit, match=r"other settings \(train.clip_norm\)"):  # a key train.yaml leaves out
        compare.train(suite, "sys", [], Path("d"), run_dir, 10, None, [])
    with pytest.raises(SystemExit, match=r"other settings \(model\)"):
        compare.train(suite, "sys", ["train.clip_norm=1.0", "model.d_model=128"], Path("d"), run_dir, 10, None, [])
    compare.train(suite, "sys", ["train.clip_norm=1.0"], Path("d"), run_dir, 20, 2, [])  # more updates, threads
    assert len(started) == 1 and started[0].train.max_steps == 20


def run_zhen_split(tmp_path: Path, train_talks: Path | None) -> subprocess.CompletedProcess:
    """recipes/lib.sh's iwslt17_zhen_split on a fake IWSLT17 folder (two lines per set)."""
    sets = tmp_path / "iwslt17"
    sets.mkdir(exist_ok=True)
    for name in ("dev2010", "tst2010", "tst2011", "tst2012", "tst2013", "tst2015", "tst2016", "tst2017"):
        for side in ("zh", "en"):
            (sets / f"{name}.{side}.gz").write_bytes(gzip.compress(f"{name} {side} 1\n{name} {side} 2\n".encode()))
    for side in ("zh", "en"):  # tst2014: the last 300 lines are the dev set
        lines = "".join(f"tst2014 {side} {i}\n" for i in range(302))
        (sets / f"tst2014.{side}.gz").write_bytes(gzip.compress(lines.encode()))
    script = (f"here={shlex.quote(str(RECIPES / 'lattice'))}; source {shlex.quote(str(RECIPES / 'lib.sh'))}; "
              f"iwslt17_zhen_split {shlex.quote(str(sets))} {shlex.quote(str(tmp_path / 'corpus'))} "
              f"{shlex.quote(str(train_talks)) if train_talks else ''}")
    return subprocess.run(["bash", "-c", script], check=False, capture_output=True, text=True)


def corpus_lines(tmp_path: Path, split: str, side: str) -> list[str]:
    return gzip.decompress((tmp_path / "corpus" / f"{split}.{side}.gz").read_bytes()).decode().splitlines()


def test_the_iwslt17_split_is_talk_disjoint_and_takes_the_training_talks_without_their_metadata(tmp_path):
    assert run_zhen_split(tmp_path, None).returncode == 0
    train, valid, test = (set(corpus_lines(tmp_path, split, "zh")) for split in ("train", "valid", "test"))
    assert len(train) == 5 * 2 + 2 and len(valid) == 300 and len(test) == 3 * 2
    assert not train & valid and not train & test and not valid & test
    assert {line.split()[0] for line in test} == {"tst2015", "tst2016", "tst2017"}
    talks = tmp_path / "talks"
    talks.mkdir()
    for side, words in (("zh", "你好 。"), ("en", "Hello .")):
        (talks / f"train.tags.zh-en.{side}").write_text(
            f"<url>http://www.ted.com/talks/x</url>\n  <talkid>1</talkid>\n<title>T {side}</title>\n {words} \n",
            encoding="utf-8")
    assert run_zhen_split(tmp_path, talks).returncode == 0
    assert corpus_lines(tmp_path, "train", "en")[:2] == ["Hello .", "dev2010 en 1"]
    assert len(corpus_lines(tmp_path, "train", "zh")) == 1 + 5 * 2 + 2
    (talks / "train.tags.zh-en.en").write_text(  # one side's metadata line where the other has text
        "<url>http://www.ted.com/talks/x</url>\nHello .\n<title>T en</title>\n World . \n", encoding="utf-8")
    failed = run_zhen_split(tmp_path, talks)
    assert failed.returncode == 1 and "train.tags.zh-en.zh:2" in failed.stderr and "metadata" in failed.stderr
    (talks / "train.tags.zh-en.en").write_text("<url>http://www.ted.com/talks/x</url>\n", encoding="utf-8")
    failed = run_zhen_split(tmp_path, talks)  # the English side ends three lines early
    assert failed.returncode == 1 and "train.tags.zh-en.en ends after line 1 but" in failed.stderr


def test_compare_refuses_the_systems_that_read_other_sources_and_runs_the_others(monkeypatch):
    suite = compare.RECIPES / "nist_verdict"
    spec, systems = read_yaml(suite / "suite.yaml"), read_yaml(suite / "systems.yaml")
    assert compare.own_sources(spec, systems, ["baseline", "onebest_jieba", "lattice_lpe_lsa"]) == [
        "onebest_jieba", "lattice_lpe_lsa"]
    assert compare.own_sources(spec, systems, ["baseline", "both_res"]) == []

    monkeypatch.setattr(sys, "argv", ["compare.py", "--suite", "nist_verdict", "--report", "r", "baseline",
                                      "lattice_lpe_lsa"])
    with pytest.raises(SystemExit, match="lattice_lpe_lsa read other source files .*replicate.py run --suite nist"):
        compare.main()


def run_script(script: Path, *args: str, cwd: Path, path: str | None = None) -> subprocess.CompletedProcess:
    """``bash SCRIPT ARGS`` in ``cwd``, its output captured; ``path``: another PATH (a fake tool first)."""
    env = None if path is None else {**os.environ, "PATH": path}
    return subprocess.run(["bash", str(script), *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env=env, timeout=60)


@pytest.mark.parametrize("script", sorted(RECIPES.glob("*/run.sh")), ids=lambda p: p.parent.name)
def test_help_prints_what_the_recipe_does_and_does_nothing_else(script, tmp_path):
    """Before, --help was an unknown flag (exit 2), the licensed recipes' "cannot be downloaded" error, or was
    passed on to compare.py, whose help the comparison recipes printed before going on with their next steps."""
    done = run_script(script, "--work", str(tmp_path / "work"), "--help", cwd=tmp_path)
    header = script.read_text().split("\n")[1].removeprefix("# ")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.split("\n")[0] == header and "usage:" in done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing set up, fetched or written


def test_a_flag_without_its_value_an_unknown_one_or_a_bad_gpu_count_is_named(tmp_path):
    """Before: bash's "lib.sh: line 36: $2: unbound variable"."""
    for script, option in (("multi30k", "--data-dir"), ("lattice", "--iwslt17-train"), ("exgre", "--steps")):
        done = run_script(RECIPES / script / "run.sh", "--minutes", "1", option, cwd=tmp_path)
        assert done.returncode == 2 and f"error: {option}: its value is missing" in done.stderr, done.stderr
        assert "unbound" not in done.stderr
    done = run_script(RECIPES / "multi30k" / "run.sh", "--bogus", "1", cwd=tmp_path)
    assert done.returncode == 2 and "unknown option --bogus" in done.stderr and "--help" in done.stderr
    # before: "[: two: integer expression expected" after the preparation, then training on one process
    done = run_script(RECIPES / "multi30k" / "run.sh", "--gpus", "two", "--data-dir", "none", cwd=tmp_path)
    assert done.returncode == 2 and "error: --gpus two: expected a number of GPUs" in done.stderr, done.stderr


@pytest.mark.parametrize("recipe", ["small_parallel_enja", "multi30k"])
def test_a_failed_download_leaves_no_corpus_file_for_the_next_run(recipe, tmp_path):
    """Before, the file of the failed transfer stayed (small_parallel_enja: its first lines, gzipped whole), and
    the next run without --download took it for the corpus."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "curl").write_text("#!/bin/sh\necho 'the first line'\nexit 56\n")  # the connection drops
    (tools / "curl").chmod(0o755)
    data = tmp_path / "da ta"
    done = run_script(RECIPES / recipe / "run.sh", "--download", "--data-dir", str(data), "--work",
                      str(tmp_path / "work"), cwd=tmp_path, path=f"{tools}:{os.environ['PATH']}")
    assert done.returncode == 2 and "error: could not download https://" in done.stderr, done.stderr
    assert list(data.iterdir()) == []


def test_a_comparison_recipe_trains_each_suite_in_its_own_folder_of_work():
    """Before, a recipe passed --work on to each compare.py as it was: the suites of exgre, future_cost, lattice
    and distortion all trained in that one folder (the second refused, its data another corpus's), and exgre's
    and distortion's analyses read work/SUITE whatever --work said."""
    checked = 0
    for script in RECIPES.glob("*/run.sh"):
        text = script.read_text()
        if "compare.py" not in text:
            continue
        assert "$root/work" not in text, script  # every folder of the suites is in work_root (--work)
        for line in text.replace("\\\n", " ").splitlines():
            if "compare.py" in line and not line.lstrip().startswith("#"):
                words = shlex.split(line.split("compare.py", 1)[1].lstrip("\"'"))
                assert "--work" in words, (script, line)
                assert words[words.index("--work") + 1].startswith(("$work", "$zhen_work")), (script, line)
                checked += 1
    assert checked >= 8


def test_the_work_flag_of_a_comparison_recipe_names_the_folder_of_its_suites(tmp_path):
    (tmp_path / "talks").mkdir()
    for side in ("zh", "en"):
        (tmp_path / "talks" / f"train.tags.zh-en.{side}").write_text("")
    script = (f"here={shlex.quote(str(RECIPES / 'lattice'))}; source {shlex.quote(str(RECIPES / 'lib.sh'))}; "
              "iwslt17_args --steps 3 --work 'my work' --iwslt17-train talks --set a=b; "
              "iwslt17_folders corpus suite; printf '%s\\n' \"$work_root\" \"$corpus\" \"$zhen_work\" \"${args[@]}\"")
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["my work", "my work/corpus_full", "my work/suite_full", "--steps", "3",
                                        "--set", "a=b"]


def test_a_prepared_work_folder_is_refused_for_another_corpus_folder(tmp_path):
    """Before, a rerun with another --data-dir and the same --work reused the data prepared from the first corpus
    (and its trained run), then scored that model on the second corpus's test set."""
    for corpus in ("first", "second"):
        write_corpus(tmp_path / corpus, f"{corpus} Satz\n")
    fake_ordo = tmp_path / "ordo"  # ordo prepare: data.yaml in --out
    fake_ordo.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --out ] && mkdir -p "$2" && : > "$2/data.yaml"; '
                         "shift; done\n")
    fake_ordo.chmod(0o755)

    def prepare(corpus: str) -> subprocess.CompletedProcess:
        script = (f"here={shlex.quote(str(RECIPES / 'multi30k'))}; source {shlex.quote(str(RECIPES / 'lib.sh'))}; "
                  f"ordo=./ordo src=de tgt=en train_split=train valid_split=valid tests=test work='my work'; "
                  f"data_dir={corpus}; recipe_prepare")
        return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False)

    assert prepare("first").returncode == 0 and prepare("./first").returncode == 0  # the same folder: reused
    refused = prepare("second")
    assert refused.returncode == 2, refused.stderr
    assert f"my work/data was prepared from the corpus in {tmp_path}/first, not {tmp_path}/second" in refused.stderr
