"""recipes/verdicts.py and replicate.py: a verdicts row rebuilt from hypothesis files, claims that
name real systems, the runs still needed and the queue that runs them."""

import argparse
import gzip
import re
import sys
from pathlib import Path

import pytest
import yaml

from ordo.data.textio import read_yaml

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
sys.path.insert(0, str(RECIPES))
import replicate
import verdicts


def test_a_system_seed_is_recorded_under_its_full_name(tmp_path):
    assert replicate.record_paths(tmp_path, "baseline.seed2") == (tmp_path / "baseline.seed2.txt",
                                                                  tmp_path / "baseline.seed2.yaml")


def write_hyps(folder: Path, system: str, seed: int, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{system}.seed{seed}.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def write_refs(data_root: Path, refs: list[str]) -> None:
    """``refs`` as Multi30k's test2016 references under ``data_root``."""
    corpus = data_root / "multi30k"
    corpus.mkdir(parents=True)
    with gzip.open(corpus / "test2016.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{ref}\n" for ref in refs))


WORDS = ["ein", "Mann", "fährt", "mit", "dem", "Fahrrad", "über", "eine", "Brücke", "am", "Abend"]
ROTATIONS = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))]  # 11 distinct-enough sentences


def test_a_row_is_rebuilt_from_the_hypothesis_files_alone(tmp_path):
    refs = ROTATIONS * 4
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k"
    for seed, cut in ((1, 3), (2, 4), (3, 5)):  # baselines drop a few words at the end, differently per seed
        write_hyps(hyps, "baseline", seed, [" ".join(r.split()[:-cut]) for r in refs])
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}

    def row_of(claim: dict) -> list[str]:
        return verdicts.claim_row(verdicts.compare(claim, tmp_path / "hyps", tmp_path / "data"), tmp_path / "hyps")

    pending = row_of(claim)
    assert pending[-1] == "pending (3 baseline, 0 system seeds)"
    write_hyps(hyps, "exgre", 1, refs)  # the references themselves: BLEU 100 on every seed
    one_of_two = row_of(claim)
    assert one_of_two[-1] == "pending (3 baseline, 1 system seeds)"
    one_seed = row_of({**claim, "seeds": 1})  # an upper bound
    assert one_seed[-1] == "confirmed" and one_seed[7].startswith("+")
    write_hyps(hyps, "exgre", 2, refs)
    row = row_of(claim)
    assert row[4] == "100.00, 100.00" and row[-1] == "confirmed"
    assert row[5] == "- / -"  # no settings files written here
    system_ribes, base_ribes = (float(r) for r in row[6].split(" / "))
    assert system_ribes == pytest.approx(100.0) and base_ribes < 100.0
    assert float(row[9]) < 0.01  # bootstrap over 88 pooled sentences
    gains = [float(g) for g in row[7].split("(")[1].rstrip(")").split(", ")]
    assert len(gains) == 2 and gains[0] < gains[1]  # seed 2's baseline dropped more words
    write_hyps(hyps, "exgre", 2, [*refs[:-1], " ".join(reversed(refs[-1].split()))])  # one sentence reversed
    ribes = verdicts.ribes_row(verdicts.compare(claim, tmp_path / "hyps", tmp_path / "data"))
    system_ribes = [float(r) for r in ribes[3].split(", ")]
    assert system_ribes[0] == pytest.approx(100.0) and system_ribes[1] < 100.0
    gain, sd = float(ribes[4].split()[0]), float(ribes[5].split()[0])
    assert ribes[4].count("+") == 3 and float(ribes[6]) < 0.05  # better on both seeds, and beyond chance
    assert 0 < gain < 2 * sd and ribes[-1] == "not confirmed at this scale"  # but inside the baselines' RIBES spread
    assert verdicts.ribes_row(verdicts.compare({**claim, "seeds": 1, "system": "refsr"}, tmp_path / "hyps",
                                               tmp_path / "data")) is None  # no seeds: no row


def test_the_runs_table_lists_every_seed_against_the_same_seed_of_its_comparison_system(tmp_path):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k"
    write_hyps(hyps, "baseline", 1, [" ".join(r.split()[:-3]) for r in refs])
    write_hyps(hyps, "exgre", 1, refs)
    write_hyps(hyps, "exgre", 2, refs)  # no baseline seed 2: no difference
    (hyps / "exgre.seed1.yaml").write_text(yaml.safe_dump({"dev_loss": {100: 2.5, 2500: 1.2345}, "train_minutes": 41.26,
                                                           "threads": 1, "commit": "0123456789abcdef+changes"}))
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    rows = verdicts.run_rows("multi30k", claims, tmp_path / "hyps", tmp_path / "data")
    assert [row[1:3] for row in rows] == [["baseline", "1"], ["exgre", "1"], ["exgre", "2"]]
    assert rows[1][3] == "100.00" and float(rows[1][4]) > 10 and rows[1][5] == "100.00"
    assert rows[1][6:] == ["1.234", "41.3", "1", "0123456+"]  # the last dev loss, not the first
    assert rows[0][4] == "-" and rows[2][4] == "-" and rows[2][6:] == ["-", "-", "-", "-"]


def test_every_claim_names_systems_of_its_corpus_verdict_suite():
    for claim in verdicts.read_claims():
        systems = read_yaml(verdicts.suite_folder(claim["corpus"]) / "systems.yaml")
        for name in (claim["baseline"], claim["system"]):
            assert name.removeprefix("oracle_") in systems, (claim, name)



def test_the_results_table_is_replaced_in_place_and_a_missing_one_is_an_error(tmp_path):
    table = "| claim | verdict |\n|---|---|\n| ExGRE | confirmed |\n"
    document = "# Verdicts\n\n| claim | verdict |\n|---|---|\n| ExGRE | pending |\n| ReFSR | pending |\n\nRuns so far.\n"
    assert verdicts.replace_table(document, table, tmp_path / "R.md") == (
        "# Verdicts\n\n| claim | verdict |\n|---|---|\n| ExGRE | confirmed |\n\nRuns so far.\n")
    with pytest.raises(verdicts.ConfigError, match="R.md: no table with the header '| claim | verdict |'"):
        verdicts.replace_table("# Verdicts\n", table, tmp_path / "R.md")


def test_the_order_table_scores_each_third_of_the_test_pairs_by_alignment_tau(tmp_path):
    refs = ROTATIONS * 3  # 33 pairs
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k"
    reversed_links, monotone_links = "0-3 1-2 2-1 3-0", "0-0 1-1 2-2 3-3"
    hard = [i % 3 == 0 for i in range(len(refs))]  # every third pair fully reversed (τ -1), the rest monotone
    hyps.mkdir(parents=True)
    (hyps / "test.align").write_text("".join(f"{reversed_links if h else monotone_links}\n" for h in hard),
                                     encoding="utf-8")
    for seed in (1, 2):  # the baseline drops the last three words of the hard pairs only
        write_hyps(hyps, "baseline", seed, [" ".join(r.split()[:-3]) if h else r for r, h in zip(refs, hard)])
    write_hyps(hyps, "exgre", 1, refs)
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    rows = verdicts.order_rows("multi30k", claims, tmp_path / "hyps", tmp_path / "data")
    assert [row[1] for row in rows] == ["test pairs", "baseline", "exgre vs baseline"]
    assert rows[0][3] == "τ -1.00..-1.00 (11 pairs)" and rows[0][4] == "-"  # two buckets: no middle third
    assert rows[0][5] == "τ 1.00..1.00 (22 pairs)"
    hardest, monotone = (float(rows[2][col].split(" (")[0]) for col in (3, 5))
    assert hardest == pytest.approx(100.0) and monotone == pytest.approx(100.0)
    assert rows[1][3].endswith("(sd 0.00)") and float(rows[1][3].split(" (")[0]) < 90.0
    assert float(rows[2][3].split("(")[1].rstrip(")")) > 10.0  # the gain lies in the hard third
    assert rows[2][5].endswith("(+0.00)")                        # and none in the monotone ones
    assert rows[1][8] == "-" and float(rows[2][8]) < 0.05         # the hard third's bootstrap p
    for seed in (1, 2):  # its comparison system has no seeds yet: no brackets, not a seed sd
        write_hyps(hyps, "rnn_h_distortion", seed, refs)
    rnn_claim = {**claims[0], "baseline": "rnnsearch", "system": "rnn_h_distortion"}
    rnn_row = verdicts.order_rows("multi30k", [*claims, rnn_claim], tmp_path / "hyps", tmp_path / "data")[-1]
    assert rnn_row[1] == "rnn_h_distortion vs rnnsearch" and rnn_row[3] == "100.00" and rnn_row[8] == "-"
    labels, series = verdicts.order_gains("multi30k", claims, tmp_path / "hyps", tmp_path / "data")
    assert labels == ["τ -1.00..-1.00", "τ 1.00..1.00"] and list(series) == ["exgre vs baseline"]
    assert series["exgre vs baseline"][0] == pytest.approx(100 - float(rows[1][3].split(" (")[0]), abs=0.01)
    assert series["exgre vs baseline"][1] == pytest.approx(0.0)  # the gain lies in the hard third only
    (hyps / "test.align").write_text("0-0\n", encoding="utf-8")
    with pytest.raises(verdicts.InputError, match="test.align: 1 lines of links for 33 test pairs"):
        verdicts.order_rows("multi30k", claims, tmp_path / "hyps", tmp_path / "data")


def test_the_test_links_are_kept_once_beside_the_hypotheses(tmp_path):
    data, folder = tmp_path / "data", tmp_path / "hyps"
    replicate.keep_test_links(data, folder)  # prepared without alignments: nothing to keep
    assert not (folder / "test.align").exists()
    data.mkdir()
    (data / "test.align").write_text("0-0 1-1\n", encoding="utf-8")
    replicate.keep_test_links(data, folder)
    (data / "test.align").write_text("0-1 1-0\n", encoding="utf-8")  # a later preparation samples other links
    replicate.keep_test_links(data, folder)
    assert (folder / "test.align").read_text(encoding="utf-8") == "0-0 1-1\n"


def test_dev_loss_curves_are_averaged_over_seeds_and_the_figures_drawn(tmp_path):
    hyps = tmp_path / "hyps" / "multi30k"
    hyps.mkdir(parents=True)
    for system, seed, curve in (("baseline", 1, {100: 3.0, 200: 2.0}), ("baseline", 2, {100: 2.0, 200: 1.0, 300: 0.5}),
                                ("exgre", 1, {100: 2.5, 200: 1.5})):
        (hyps / f"{system}.seed{seed}.yaml").write_text(yaml.safe_dump({"dev_loss": curve}), encoding="utf-8")
    assert verdicts.mean_dev_loss(hyps, "baseline") == {100: 2.5, 200: 1.5}  # update 300: one seed only
    assert verdicts.mean_dev_loss(hyps, "refsr") == {}
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}
    pending = verdicts.Comparison(claim, ["a"], False, {1: ["a"], 2: ["a"]}, {1: ["a"]}, {1: 30.0, 2: 31.0},
                                   {1: 32.0})
    figures = tmp_path / "figures"
    assert verdicts.write_figures([pending], tmp_path / "hyps", tmp_path / "data", figures) == [
        figures / "verdicts_dev_loss.png"]  # no test.align: no figure by reordering difficulty
    ready = verdicts.Comparison({**claim, "seeds": 1}, **{k: v for k, v in vars(pending).items() if k != "claim"})
    assert ready.gains == [2.0] and ready.baseline_sd == pytest.approx(0.7071, abs=1e-4)
    paths = verdicts.write_figures([ready], tmp_path / "hyps", tmp_path / "data", figures)
    assert [path.name for path in paths] == ["verdicts_gains.png", "verdicts_dev_loss.png"]
    assert all(path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in paths)


def test_pending_runs_come_baseline_first_then_seed_by_seed_with_a_third_seed_where_signs_differ(tmp_path):
    refs = ROTATIONS * 4
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k"
    write_hyps(hyps, "baseline", 1, [" ".join(r.split()[:-3]) for r in refs])
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"},
              {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "onebest_spm8k",
               "system": "lattice_lpe_lsa"}]

    def pending() -> list[str]:
        return [str(run) for run in replicate.pending_runs(claims, tmp_path / "hyps", tmp_path / "data")]

    assert pending() == ["m30k_verdict baseline.seed2", "m30k_verdict baseline.seed3", "m30k_verdict exgre.seed1",
                         "m30k_verdict onebest_spm8k.seed1", "m30k_verdict lattice_lpe_lsa.seed1",
                         "m30k_verdict exgre.seed2", "m30k_verdict onebest_spm8k.seed2",
                         "m30k_verdict lattice_lpe_lsa.seed2"]
    write_hyps(hyps, "baseline", 2, [" ".join(r.split()[:-3]) for r in refs])
    write_hyps(hyps, "exgre", 1, refs)                                      # better than the baseline on seed 1
    write_hyps(hyps, "exgre", 2, [" ".join(r.split()[:-5]) for r in refs])  # worse on seed 2: a third seed
    assert pending()[:2] == ["m30k_verdict baseline.seed3", "m30k_verdict onebest_spm8k.seed1"]
    assert pending()[-1] == "m30k_verdict exgre.seed3"  # it only sharpens the mean: last
    write_hyps(hyps, "exgre", 2, refs)  # better on both seeds: two are enough
    assert "m30k_verdict exgre.seed3" not in pending()
    for seed, cut in ((1, 2), (2, 4)):  # a comparison system other than the baseline: both get a third seed
        write_hyps(hyps, "onebest_spm8k", seed, [" ".join(r.split()[:-3]) for r in refs])
        write_hyps(hyps, "lattice_lpe_lsa", seed, [" ".join(r.split()[:-cut]) for r in refs])
    assert pending() == ["m30k_verdict baseline.seed3", "m30k_verdict onebest_spm8k.seed3",
                         "m30k_verdict lattice_lpe_lsa.seed3"]
    assert [run.sharpens for run in replicate.pending_runs(claims, tmp_path / "hyps", tmp_path / "data")] == [
        False, True, True]
    oracle = [{**claims[0], "system": "oracle_baseline", "seeds": 1}]
    assert [str(run) for run in replicate.pending_runs(oracle, tmp_path / "hyps", tmp_path / "data")] == [
        "m30k_verdict baseline.seed3", "m30k_verdict --oracle baseline.seed1"]


def test_the_queue_runs_what_is_pending_and_leaves_a_run_another_process_holds(tmp_path, monkeypatch):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    ran = []

    def run_system(args, label):  # another process holds exgre.seed2; the others translate perfectly
        if label == "exgre.seed2":
            return False
        ran.append((args.suite, label, args.threads))
        write_hyps(tmp_path / "hyps" / "multi30k", *verdicts.split_seed(label), refs)
        return True

    monkeypatch.setattr(replicate, "run_system", run_system)
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    args = argparse.Namespace(suites=None, data_root=tmp_path / "data", threads=1)
    replicate.work_queue(args, claims)
    assert [label for _, label, _ in ran] == ["baseline.seed1", "baseline.seed2", "baseline.seed3", "exgre.seed1"]
    assert ran[0] == ("m30k_verdict", "baseline.seed1", 1)
    assert [str(run) for run in replicate.selected_runs(args, claims)] == ["m30k_verdict exgre.seed2"]
    assert replicate.selected_runs(argparse.Namespace(suites=["enja_verdict"], data_root=tmp_path / "data"),
                                   claims) == []  # only another suite's runs asked for


def test_a_run_another_process_holds_is_left_alone_and_a_recorded_one_not_trained_again(tmp_path, monkeypatch):
    corpus = tmp_path / "data"
    corpus.mkdir()
    with gzip.open(corpus / "test2016.en.gz", "wt", encoding="utf-8") as handle:
        handle.write("a man\n")
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    calls = []
    monkeypatch.setattr(replicate, "prepare", lambda *args: calls.append("prepare"))
    monkeypatch.setattr(replicate, "keep_test_links", lambda *args: None)
    monkeypatch.setattr(replicate, "train", lambda *args: calls.append("train"))

    def record(run_dir, name, seed, overrides, sources, hyps_path, settings_path):
        calls.append(("record", sources, overrides[-1]))
        write_hyps(hyps_path.parent, name, seed, ["ein Mann"])

    monkeypatch.setattr(replicate, "record", record)
    args = argparse.Namespace(suite="m30k_verdict", data_dir=corpus, work=tmp_path / "work", oracle=False, threads=1)
    with replicate.folder_lock(tmp_path / "work" / "runs" / "exgre.seed1") as held:
        assert held and replicate.run_system(args, "exgre.seed1") is False
    assert calls == []
    assert replicate.run_system(args, "exgre.seed1") is True
    assert calls == ["prepare", "train", ("record", ["a man"], "train.seed=1")]
    assert replicate.run_system(args, "exgre.seed1") is True and len(calls) == 3  # recorded: nothing to do

    monkeypatch.setattr(replicate, "oracle_corpus", lambda *args: corpus)
    monkeypatch.setattr(replicate, "record", lambda run_dir, name, *args: calls.append(("record", name)))
    oracle = argparse.Namespace(**{**vars(args), "oracle": True})
    assert replicate.run_system(oracle, "baseline.seed1") is True
    assert calls[-1] == ("record", "oracle_baseline")  # its settings name the system as its files do


def test_tables_can_leave_the_results_document_alone(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["replicate.py", "tables", "--results", ""])
    assert replicate.parse_args().results is None  # was Path("."), which the tables then tried to open
    monkeypatch.setattr(sys, "argv", ["replicate.py", "tables"])
    assert replicate.parse_args().results.name == "RESULTS.md"


def test_a_copy_without_git_names_its_commit_from_the_environment_or_stops(tmp_path, monkeypatch):
    monkeypatch.setattr(replicate, "ROOT", tmp_path)
    monkeypatch.delenv("ORDO_COMMIT", raising=False)
    with pytest.raises(SystemExit, match="not a git checkout.*ORDO_COMMIT"):
        replicate.commit_id()
    monkeypatch.setenv("ORDO_COMMIT", "0123abc")
    assert replicate.commit_id() == "0123abc"


def test_the_named_commit_wins_over_a_checkout_whose_git_is_stale(monkeypatch):
    monkeypatch.setenv("ORDO_COMMIT", "0123abc")
    assert replicate.commit_id() == "0123abc"
    monkeypatch.delenv("ORDO_COMMIT")
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", replicate.commit_id())


def test_the_settings_name_the_training_device_and_its_precision():
    assert replicate.training_device({"device": "cpu", "amp": "auto"}) == {"device": "cpu", "precision": "float32"}
    assert replicate.training_device({"device": "cpu", "amp": "bf16"}) == {"device": "cpu", "precision": "bfloat16"}
