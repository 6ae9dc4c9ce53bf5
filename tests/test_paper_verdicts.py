"""The verdict suites at the papers' own scale (recipes/{wmt14,wmt17,aspec,kftt,nist,iwslt16}_verdict): each claim's
seeds sized for its paper's gain, GPU suites refused on a CPU, a corpus folder given at run time and found again
by the tables, a folder that lacks a split named, and two suites run as a trial at a tiny budget on a miniature
corpus down to their verdict rows: WMT14's, and NIST's lattice systems from the unsegmented Chinese that
recipes/nist_zhen/corpus.py writes beside the words."""

import gzip
import shutil
import sys
from pathlib import Path

import pytest
import torch
import yaml

from ordo.data.lattice.segmenters import WORD_SEGMENTERS
from ordo.data.textio import read_lines, read_yaml
from ordo.evaluation.seeds import seeds_needed
from ordo.precision import amp_dtype

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the recipes package
from bench import gpu_hours
from recipes import budgets, replicate, verdicts
from recipes.nist_zhen import corpus as nist_corpus

PAPER_SUITES = ["wmt14_verdict", "wmt17_verdict", "aspec_verdict", "kftt_verdict", "nist_verdict", "iwslt16_verdict"]
TINY = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=300", "train.update_freq=1",
        "train.valid_every=2", "train.warmup_steps=2", "train.progress=false", "train.threads=1", "train.device=cpu",
        "decode.max_len_a=0", "decode.max_len_b=8"]
WORDS = {"en": "the a house cat dog tree green small sees", "de": "der die das haus katze hund baum grün sieht",
         "zh": "这 一个 房子 猫 狗 树 绿色 小 看见"}


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


def test_the_gpu_hours_price_every_run_the_paper_scale_claims_want():
    claims = verdicts.read_claims()
    assert sorted(gpu_hours.SUITES) == sorted(PAPER_SUITES)
    for suite in PAPER_SUITES:
        runs = gpu_hours.verdict_runs(suite, claims)
        for claim in (claim for claim in claims if claim["corpus"] == suite_spec(suite)["corpus"]):
            assert runs[claim["system"]] >= claim["seeds"] and runs[claim["baseline"]] >= max(claim["seeds"], 2)
            for system in (claim["system"], claim["baseline"]):  # priced, or named as left out
                assert (system in gpu_hours.COST) != (system in gpu_hours.UNPRICED), (suite, system)
    row = gpu_hours.verdict_row("nist_verdict", claims, budgets.folder_budget(verdicts.RECIPES / "nist_verdict"))
    # RNNsearch* has no GPU figure: named, not priced
    assert "lattice_lpe 6, lattice_lsa 10 (36 runs); not counted: rnnsearch 3, rnn_h_distortion 3" in row


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


def made_up(lang: str, count: int) -> list[str]:
    """``count`` made-up sentences of ``lang``, sentence i's words those of sentence i of every other language."""
    vocab = WORDS[lang].split()
    return [" ".join(vocab[(i + k * (i % 3 + 1)) % len(vocab)] for k in range(3 + i % 4)) + f" {i}"
            for i in range(count)]


def write_corpus(folder: Path, pairs: dict[str, int]) -> None:
    """A made-up En-De corpus in the prepared layout of recipes/wmt14_ende (SPLIT.{en,de}.gz), ``pairs[SPLIT]``
    sentence pairs a split, each pair's words in the same order on both sides."""
    folder.mkdir(parents=True)
    for split, count in pairs.items():
        for lang in ("en", "de"):
            with gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8") as handle:
                handle.write("".join(f"{line}\n" for line in made_up(lang, count)))


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
    precision = "bf16" if amp_dtype("auto", torch.device("cpu")) else "fp32"  # train.amp: auto on this CPU
    assert folder.name.startswith("cpu-") and folder.name.endswith(f"-t1-{precision}-paper")  # the default budget
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


def test_the_lattice_systems_read_the_unsegmented_source_and_a_folder_without_it_is_named():
    for suite in PAPER_SUITES:  # a word segmenter of a lattice never reads text that corpus.py segmented already
        spec, systems = suite_spec(suite), read_yaml(verdicts.RECIPES / suite / "systems.yaml")
        for name, entry in systems.items():
            prepare_file, _ = replicate.system_entry(name, entry)
            lattice = read_yaml(verdicts.RECIPES / suite / prepare_file).get("lattice", {})
            if set(lattice.get("segmenters", [])) & set(WORD_SEGMENTERS):
                assert verdicts.run_spec(spec, prepare_file)["src"] == nist_corpus.RAW, (suite, name)
    spec = suite_spec("nist_verdict")
    assert verdicts.run_spec(spec, "prepare.yaml") == spec  # the other systems read jieba's words
    lattice = verdicts.run_spec(spec, "prepare_lattice.yaml")
    assert verdicts.split_files(lattice, "test") == ["nist03.raw.zh.gz", "nist03.en.gz"]
    runs = replicate.SuiteRuns("nist_verdict", data_dir=Path("/nonexistent/nist"))
    with pytest.raises(SystemExit, match=r"/nonexistent/nist: no train.raw.zh.gz, train.en.gz, valid.raw.zh.gz, "
                                         r"valid.en.gz, nist03.raw.zh.gz, nist03.en.gz \(the nist_verdict suite's"):
        replicate.corpus_folder(runs, lattice)


def write_nist_copy(folder: Path, pairs: dict[str, int]) -> Path:
    """A made-up copy of NIST Zh->En in the layout of recipes/nist_zhen (docs/recipes.md) in ``folder``: for each
    NAME of ``pairs`` (``train`` and NIST sets) ``pairs[NAME]`` unsegmented Chinese sentences and their English,
    one reference a set.

    Returns:
        the sets file of the copy's counts (as recipes/nist_zhen/sets.yaml).
    """
    folder.mkdir(parents=True)
    for name, count in pairs.items():
        english = folder / (f"{name}.en" if name == "train" else f"{name}.en0")
        (folder / f"{name}.zh").write_text("".join(f"{line.replace(' ', '')}\n" for line in made_up("zh", count)),
                                           encoding="utf-8")
        english.write_text("".join(f"{line}\n" for line in made_up("en", count)), encoding="utf-8")
    sets = folder.parent / "sets.yaml"
    sets.write_text(yaml.safe_dump({"references": 1, "sets": {k: v for k, v in pairs.items() if k != "train"}}))
    return sets


def test_the_nist_lattice_systems_run_as_a_trial_from_the_unsegmented_chinese_down_to_their_verdict_row(
        tmp_path, monkeypatch):
    monkeypatch.setenv("ORDO_COMMIT", "0123456789abcdef")  # the checkout may hold uncommitted work while testing
    copy, corpus, hyps, work = tmp_path / "NIST", tmp_path / "corpus", tmp_path / "hyps", tmp_path / "work"
    sets = write_nist_copy(copy, {"train": 60, "nist02": 6, "nist03": 8})
    nist_corpus.split(copy, corpus, sets, "nist02", ["nist03"], "jieba")
    raw = read_lines(copy / "nist03.zh")
    assert read_lines(corpus / "nist03.raw.zh.gz") == raw  # the lattices' input, beside jieba's words
    assert [line.replace(" ", "") for line in read_lines(corpus / "nist03.zh.gz")] == raw
    trial = [word for key in TINY for word in ("--trial-set", key)]
    replicate_main(monkeypatch, "run", "--suite", "nist_verdict", "--data-dir", str(corpus), "--work", str(work),
                   "--hyps", str(hyps), "--trial-steps", "4", *trial, "onebest_jieba.seed1", "lattice_lpe_lsa.seed1")
    for data, segmenters in (("data_onebest", ["jieba"]), ("data_lattice", ["jieba", "thulac", "chars"])):
        assert read_yaml(work / data / "corpus.yaml")["--test-src"].startswith("nist03.raw.zh.gz ")
        assert read_yaml(work / data / "lattice" / "lattice.yaml")["segmenters"] == segmenters
    (folder,) = [path for path in (hyps / "nist_zhen").iterdir() if path.is_dir()]
    settings = read_yaml(folder / "lattice_lpe_lsa.seed1.yaml")
    assert settings["data"] == "data_lattice" and settings["updates"] == 4
    assert len((folder / "lattice_lpe_lsa.seed1.txt").read_text().splitlines()) == len(raw)

    out = tmp_path / "tables" / "verdicts.md"
    replicate_main(monkeypatch, "tables", "--hyps", str(hyps), "--out", str(out), "--results", "")
    rows = [line.split(" | ") for line in out.read_text().splitlines() if "| nist_zhen |" in line]
    lattice = next(row for row in rows if row[4] == "lattice_lpe_lsa vs onebest_jieba")
    assert float(lattice[5]) >= 0  # BLEU against nist03's first reference
    assert lattice[-1].rstrip(" |") == "pending (1 baseline, 1 system seeds of 4)"
