"""The verdict suites at the papers' own scale (recipes/{wmt14,aspec,kftt,nist}_verdict): each claim's seeds
sized for its paper's gain, GPU suites refused on a CPU, a corpus folder given at run time and found again by the
tables, a folder that lacks a split named, and a whole WMT14 suite run as a trial at a tiny budget on a
miniature corpus down to its verdict rows."""

import gzip
import shutil
import sys
from pathlib import Path

import pytest

from ordo.data.textio import read_yaml
from ordo.evaluation.seeds import seeds_needed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the recipes package
from recipes import replicate, verdicts

PAPER_SUITES = ["wmt14_verdict", "aspec_verdict", "kftt_verdict", "nist_verdict"]
TINY = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=300", "train.update_freq=1",
        "train.valid_every=2", "train.warmup_steps=2", "train.progress=false", "train.threads=1", "train.device=cpu",
        "decode.max_len_a=0", "decode.max_len_b=8"]
WORDS = {"en": "the a house cat dog tree green small sees", "de": "der die das haus katze hund baum grün sieht"}


def suite_spec(suite: str) -> dict:
    """recipes/SUITE/suite.yaml."""
    return read_yaml(verdicts.RECIPES / suite / "suite.yaml")


def test_every_paper_scale_claim_has_the_seeds_its_gain_needs_at_the_suites_seed_sd():
    claims = verdicts.read_claims()
    for suite in PAPER_SUITES:
        spec = suite_spec(suite)
        assert spec["needs_gpu"] and spec["data_dir"] and spec["seed_sd"] > 0, suite
        on_corpus = [claim for claim in claims if claim["corpus"] == spec["corpus"]]
        assert on_corpus, suite
        gains = [claim["paper_gain"] for claim in on_corpus if claim["paper_gain"]]
        for claim in on_corpus:  # no gain in the paper's text: the count of the smallest gain on the corpus
            gain = claim["paper_gain"] or min(gains)
            assert claim["seeds"] == seeds_needed(gain, spec["seed_sd"]), claim


def test_a_paper_scale_suite_is_refused_on_a_cpu_but_in_a_trial(monkeypatch):
    monkeypatch.setattr(replicate, "training_device", lambda config: {"device": "cpu", "precision": "float32"})
    monkeypatch.setenv("ORDO_COMMIT", "0123abc")
    for suite in PAPER_SUITES:
        assert replicate.machine_set(suite, None) is None  # pending and queue leave it out
    with pytest.raises(SystemExit, match="wmt14_verdict needs a GPU .* trains on its CPU"):
        replicate.plan_run(replicate.SuiteRuns("wmt14_verdict"), "baseline.seed1")
    trial = replicate.SuiteRuns("wmt14_verdict", trial=replicate.Trial(4, tuple(TINY)))
    assert replicate.plan_run(trial, "baseline.seed1").settings["trial"] == {"steps": 4, "overrides": TINY}


def test_a_trial_needs_its_own_hyps_folder(monkeypatch, tmp_path):
    for extra in ([], ["--hyps", str(replicate.HYPS)]):
        monkeypatch.setattr(sys, "argv", ["replicate.py", "run", "--suite", "wmt14_verdict", "--trial-steps", "4",
                                          *extra, "baseline.seed1"])
        with pytest.raises(SystemExit, match="need their own --hyps DIR"):
            replicate.suite_runs(replicate.parse_args())
    monkeypatch.setattr(sys, "argv", ["replicate.py", "run", "--suite", "wmt14_verdict", "--trial-steps", "4",
                                      "--hyps", str(tmp_path), "baseline.seed1"])
    assert replicate.suite_runs(replicate.parse_args()).trial == replicate.Trial(4)


def write_corpus(folder: Path, pairs: dict[str, int]) -> None:
    """A made-up En-De corpus in the prepared layout of recipes/wmt14_ende (SPLIT.{en,de}.gz), ``pairs[SPLIT]``
    sentence pairs a split, each pair's words in the same order on both sides."""
    folder.mkdir(parents=True)
    for split, count in pairs.items():
        for lang, words in WORDS.items():
            vocab = words.split()
            lines = [" ".join(vocab[(i + k * (i % 3 + 1)) % len(vocab)] for k in range(3 + i % 4)) for i in range(count)]
            with gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8") as handle:
                handle.write("".join(f"{line} {i}\n" for i, line in enumerate(lines)))


def test_a_corpus_folder_that_lacks_a_split_is_named():
    spec = suite_spec("wmt14_verdict")
    runs = replicate.SuiteRuns("wmt14_verdict", data_dir=Path("/nonexistent/wmt14"))
    with pytest.raises(SystemExit, match=r"/nonexistent/wmt14: no train.en.gz, train.de.gz, valid.en.gz, "
                                         r"valid.de.gz, test.en.gz, test.de.gz \(the wmt14_verdict suite's splits "
                                         r"train: train, valid: valid, test: test, en -> de\): give its corpus "
                                         r"folder with --data-dir DIR"):
        replicate.corpus_folder(runs, spec)


def test_a_missing_split_is_named_before_anything_is_prepared(tmp_path):
    write_corpus(tmp_path / "mini", {"train": 4, "test": 2})
    runs = replicate.SuiteRuns("wmt14_verdict", data_dir=tmp_path / "mini", hyps=tmp_path / "hyps")
    with pytest.raises(SystemExit, match=r"mini: no valid.en.gz, valid.de.gz \("):
        replicate.corpus_folder(runs, suite_spec("wmt14_verdict"))


def replicate_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """``python recipes/replicate.py ARGS`` in this process."""
    monkeypatch.setattr(sys, "argv", ["replicate.py", *args])
    replicate.main()


def test_a_paper_suite_runs_as_a_trial_on_a_corpus_given_at_run_time_and_its_tables_find_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ORDO_COMMIT", "0123456789abcdef")  # the checkout may hold uncommitted work while testing
    mini, hyps, out = tmp_path / "mini", tmp_path / "hyps", tmp_path / "tables" / "verdicts.md"
    write_corpus(mini, {"train": 60, "valid": 6, "test": 8})
    trial = [word for key in TINY for word in ("--trial-set", key)]
    replicate_main(monkeypatch, "run", "--suite", "wmt14_verdict", "--data-dir", str(mini), "--work",
                   str(tmp_path / "work"), "--hyps", str(hyps), "--trial-steps", "4", *trial,
                   "baseline.seed1", "both_res.seed1")
    (folder,) = [path for path in (hyps / "wmt14_ende").iterdir() if path.is_dir()]  # the set of the runs
    assert folder.name.startswith("cpu-") and folder.name.endswith("-t1-fp32")
    settings = read_yaml(folder / "both_res.seed1.yaml")
    assert not Path(settings["corpus_dir"]).is_absolute(), "no path of one machine in the committed settings"
    assert (verdicts.ROOT / settings["corpus_dir"]).resolve() == mini.resolve() and settings["trial"]["steps"] == 4
    assert settings["updates"] == 4 and len((folder / "both_res.seed1.txt").read_text().splitlines()) == 8
    assert (hyps / "wmt14_ende" / "test.align").exists()  # the prepared test links, for the order table

    replicate_main(monkeypatch, "tables", "--hyps", str(hyps), "--out", str(out), "--results", "")
    rows = [line.split(" | ") for line in out.read_text().splitlines() if "| wmt14_ende |" in line]
    both = next(row for row in rows if row[4] == "both_res vs baseline")
    assert float(both[5]) >= 0  # BLEU against the references of the folder the runs recorded
    assert both[-1].rstrip(" |") == "pending (1 baseline, 1 system seeds of 3)"
    assert "| wmt14_ende |" in out.with_name("verdicts_runs.md").read_text()

    moved = tmp_path / "moved"
    shutil.move(mini, moved)
    with pytest.raises(SystemExit, match=f"wmt14_ende: no test references test.de.gz in {mini.resolve()}, "
                                         ".*`replicate.py tables --data-dir wmt14_ende=DIR`"):
        replicate_main(monkeypatch, "tables", "--hyps", str(hyps), "--out", str(out), "--results", "")
    replicate_main(monkeypatch, "tables", "--hyps", str(hyps), "--out", str(out), "--results", "",
                   "--data-dir", f"wmt14_ende={moved}")
    assert "both_res vs baseline" in out.read_text()
