"""recipes/verdicts.py and replicate.py: a verdicts row rebuilt from hypothesis files, claims that
name real systems, comparisons of runs that are not exchangeable refused, the settings a run records, the runs
still needed and the queue that runs them."""

import dataclasses
import gzip
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import yaml

from ordo.analysis.tables import markdown_table
from ordo.data.textio import read_yaml
from ordo.evaluation.seeds import SeedTest, min_detectable_gain

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the recipes package
from recipes import replicate, verdicts


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


SET = "gpu-nvidia-h200-bf16"


def corpora(tmp_path: Path) -> verdicts.CorpusFolders:
    """The tables' corpus folders with tmp_path/data in place of ../shared/data."""
    return verdicts.CorpusFolders(tmp_path / "data")


def exchangeable(**changed: object) -> dict:
    """The settings of a run of the H200 set, with ``changed`` fields."""
    return {"commit": "238c92ae52bc", "device": "NVIDIA H200", "threads": 1, "precision": "bfloat16",
            "data": "data", "data_hash": "ab" * 32, "train_minutes": 2.1, **changed}


WORDS = ["ein", "Mann", "fährt", "mit", "dem", "Fahrrad", "über", "eine", "Brücke", "am", "Abend"]
ROTATIONS = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))]  # 11 distinct-enough sentences


def test_a_row_is_rebuilt_from_the_hypothesis_files_alone(tmp_path):
    refs = ROTATIONS * 4
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k" / SET
    for seed, cut in ((1, 3), (2, 4), (3, 5)):  # baselines drop a few words at the end, differently per seed
        write_hyps(hyps, "baseline", seed, [" ".join(r.split()[:-cut]) for r in refs])
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre",
             "paper_gain": 30.0}  # BLEU: these synthetic seeds spread by about 10

    def row_of(claim: dict) -> list[str]:
        return verdicts.claim_row(verdicts.compare(claim, hyps, corpora(tmp_path)))

    pending = row_of(claim)  # a third baseline seed (another claim's) stays out of this one, due at two
    assert pending[8:] == ["-"] * 5 + ["pending (2 baseline, 0 system seeds of 2)"]
    write_hyps(hyps, "exgre", 1, refs)  # the references themselves: BLEU 100 on every seed
    one_of_two = row_of(claim)
    assert one_of_two[-1] == "pending (2 baseline, 1 system seeds of 2)" and one_of_two[8].startswith("+")
    assert row_of({**claim, "seeds": 3})[-1] == "pending (3 baseline, 1 system seeds of 3)"
    write_hyps(hyps, "exgre", 2, [*refs[:-1], " ".join(reversed(refs[-1].split()))])  # one sentence reversed
    row = row_of(claim)
    assert row[3] == SET and row[5].startswith("100.00, 9") and row[-1] == "gain"
    assert row[6] == "- / -"  # no settings files written here
    system_ribes, base_ribes = (float(r) for r in row[7].split(" / "))
    assert 98 < system_ribes < 100.0 and base_ribes < system_ribes
    gain, interval = row[8].split(" [")
    low, high = (float(end) for end in interval.rstrip("]").split(", "))
    assert 0 < low < float(gain) < high and float(row[9]) < 0.05
    assert float(row[10]) > 0 and int(row[11]) >= 2 and float(row[12]) < 0.01  # bootstrap over 88 pooled sentences
    ribes = verdicts.ribes_row(verdicts.compare(claim, hyps, corpora(tmp_path)))
    system_ribes = [float(r) for r in ribes[4].split(", ")]
    assert system_ribes[0] == pytest.approx(100.0) and system_ribes[1] < 100.0
    assert ribes[8] == "-" and ribes[-1] == "inconclusive"  # no RIBES gain claimed; seeds too few to tell
    assert float(ribes[9]) < 0.05  # though the sentences, which ignore the seed spread, say it differs
    assert verdicts.ribes_row(verdicts.compare({**claim, "system": "refsr"}, hyps,
                                               corpora(tmp_path))) is None  # no seeds: no row


def test_the_runs_table_lists_every_seed_against_the_same_seed_of_its_comparison_system(tmp_path):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k" / SET
    write_hyps(hyps, "baseline", 1, [" ".join(r.split()[:-3]) for r in refs])
    write_hyps(hyps, "exgre", 1, refs)
    write_hyps(hyps, "exgre", 2, refs)  # no baseline seed 2: no difference
    (hyps / "exgre.seed1.yaml").write_text(yaml.safe_dump({"dev_loss": {100: 2.5, 2500: 1.2345}, "train_minutes": 41.26,
                                                           "threads": 1, "commit": "0123456789abcdef+changes"}))
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    rows = verdicts.run_rows("multi30k", claims, tmp_path / "hyps", corpora(tmp_path))
    assert [row[1:4] for row in rows] == [[SET, "baseline", "1"], [SET, "exgre", "1"], [SET, "exgre", "2"]]
    assert rows[1][4] == "100.00" and float(rows[1][5]) > 10 and rows[1][6] == "100.00"
    assert rows[1][7:] == ["1.234", "41.3", "1", "0123456+"]  # the last dev loss, not the first
    assert rows[0][5] == "-" and rows[2][5] == "-" and rows[2][7:] == ["-", "-", "-", "-"]


def test_only_the_summary_s_verdicts_go_into_the_results_document_and_every_table_beside_them(tmp_path):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k" / SET
    for seed in (1, 2):
        write_hyps(hyps, "baseline", seed, [" ".join(r.split()[:-seed]) for r in refs])
        write_hyps(hyps, "exgre", seed, [*refs[:-seed], *(" ".join(reversed(r.split())) for r in refs[-seed:])])
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre",
               "paper_gain": 0.75},
              {"paper": "q", "claim": "not run", "corpus": "small_parallel_enja", "baseline": "baseline",
               "system": "refsr"},
              {"paper": "r", "claim": "baseline only", "corpus": "multi30k", "baseline": "baseline", "system": "refsr"},
              {"paper": "s", "claim": "due at three seeds", "corpus": "multi30k", "baseline": "baseline",
               "system": "exgre", "seeds": 3}]
    header = {name: markdown_table(columns, []).splitlines()[0] for name, columns in
              (("summary", verdicts.SUMMARY_HEADER), ("verdicts", verdicts.HEADER),
               ("ribes", verdicts.RIBES_HEADER), ("runs", verdicts.RUNS_HEADER))}
    results = tmp_path / "RESULTS.md"
    old_rows = "| old | rows |\n"
    results.write_text(f"# r\n\n{header['summary']}\n{old_rows}\nthe rest\n")
    out = tmp_path / "tables" / "verdicts.md"
    verdicts.write_tables(claims, tmp_path / "hyps", corpora(tmp_path), out, results)
    document = results.read_text()
    row = next(line for line in document.splitlines() if line.startswith("| p |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert old_rows not in document and document.endswith("\nthe rest\n")  # replaced in place
    assert cells[1:6] == ["exgre vs baseline", "+0.75", "multi30k", SET, "2 / 2"]
    assert all(re.fullmatch(r"[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\]", cell) for cell in cells[6:8])
    assert cells[6] != cells[7] and cells[8] in ("gain", "loss", "paper's gain ruled out", "inconclusive")
    for paper in ("q", "r"):  # no runs, or runs on one side only: in the full table, not the summary
        assert f"| {paper} |" not in document and f"| {paper} |" in (out.parent / "verdicts.md").read_text(), paper
        assert f"| {paper} |" not in (out.parent / "verdicts_summary.md").read_text(), paper
    pending = next(line for line in (out.parent / "verdicts_summary.md").read_text().splitlines()
                   if line.startswith("| s |"))  # runs on both sides, no verdict yet: in the summary file alone
    assert pending.rstrip(" |").endswith("pending (2 baseline, 2 system seeds of 3)") and "| s |" not in document
    for name in ("verdicts", "ribes", "runs"):  # the full tables stay beside the verdicts
        assert header[name] not in document
    for name, path in (("summary", "verdicts_summary.md"), ("verdicts", "verdicts.md"), ("ribes", "verdicts_ribes.md"),
                       ("runs", "verdicts_runs.md")):
        assert (out.parent / path).read_text().startswith(header[name]), name


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
    links = tmp_path / "hyps" / "multi30k"
    hyps = links / SET
    reversed_links, monotone_links = "0-3 1-2 2-1 3-0", "0-0 1-1 2-2 3-3"
    hard = [i % 3 == 0 for i in range(len(refs))]  # every third pair fully reversed (τ -1), the rest monotone
    hyps.mkdir(parents=True)
    (links / "test.align").write_text("".join(f"{reversed_links if h else monotone_links}\n" for h in hard),
                                     encoding="utf-8")
    for seed in (1, 2):  # the baseline drops the last three words of the hard pairs only
        write_hyps(hyps, "baseline", seed, [" ".join(r.split()[:-3]) if h else r for r, h in zip(refs, hard)])
    write_hyps(hyps, "exgre", 1, refs)
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    rows = verdicts.order_rows("multi30k", claims, tmp_path / "hyps", corpora(tmp_path))
    rows = [row[:1] + row[2:] for row in rows]  # the set column left out
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
    rnn_row = verdicts.order_rows("multi30k", [*claims, rnn_claim], tmp_path / "hyps", corpora(tmp_path))[-1]
    assert rnn_row[2] == "rnn_h_distortion vs rnnsearch" and rnn_row[4] == "100.00" and rnn_row[9] == "-"
    labels, series = verdicts.order_gains("multi30k", hyps, claims, tmp_path / "hyps", corpora(tmp_path))
    assert labels == ["τ -1.00..-1.00", "τ 1.00..1.00"] and list(series) == ["exgre vs baseline"]
    assert series["exgre vs baseline"][0] == pytest.approx(100 - float(rows[1][3].split(" (")[0]), abs=0.01)
    assert series["exgre vs baseline"][1] == pytest.approx(0.0)  # the gain lies in the hard third only
    (links / "test.align").write_text("0-0\n", encoding="utf-8")
    with pytest.raises(verdicts.InputError, match="test.align: 1 lines of links for 33 test pairs"):
        verdicts.order_rows("multi30k", claims, tmp_path / "hyps", corpora(tmp_path))


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
    hyps = tmp_path / "hyps" / "multi30k" / SET
    hyps.mkdir(parents=True)
    for system, seed, curve in (("baseline", 1, {100: 3.0, 200: 2.0}), ("baseline", 2, {100: 2.0, 200: 1.0, 300: 0.5}),
                                ("exgre", 1, {100: 2.5, 200: 1.5})):
        (hyps / f"{system}.seed{seed}.yaml").write_text(yaml.safe_dump({"dev_loss": curve}), encoding="utf-8")
    assert verdicts.mean_dev_loss(hyps, "baseline") == {100: 2.5, 200: 1.5}  # update 300: one seed only
    assert verdicts.mean_dev_loss(hyps, "refsr") == {}
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}
    pending = verdicts.Comparison(claim, ["a"], False, {1: ["a"]}, {1: ["a"]}, {1: 30.0}, {1: 32.0}, hyps)
    figures = tmp_path / "figures"
    assert verdicts.write_figures([pending], tmp_path / "hyps", corpora(tmp_path), figures) == [
        figures / "verdicts_dev_loss.png"]  # no test.align: no figure by reordering difficulty
    runs = {1: ["a b c d"], 2: ["a b c"]}
    ready = verdicts.Comparison({**claim, "seeds": 1}, ["a b c d"], False, runs, {1: ["a b c d"], 2: ["a b c e"]},
                                {}, {}, hyps)
    paths = verdicts.write_figures([ready], tmp_path / "hyps", corpora(tmp_path), figures)
    assert [path.name for path in paths] == ["verdicts_gains.png", "verdicts_dev_loss.png"]
    assert all(path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in paths)


def test_pending_runs_come_seed_by_seed_in_this_machines_set_comparison_systems_first(tmp_path):
    hyps = tmp_path / "hyps" / "small_parallel_enja"
    cpu_set = "cpu-amd-epyc-25-1-t1-fp32"
    write_hyps(hyps / cpu_set, "baseline", 1, ["a"])
    write_hyps(hyps / "first_pass", "rnnsearch", 1, ["a"])  # the first pass counts for no set
    claims = [{"corpus": "small_parallel_enja", "baseline": "baseline", "system": "both_res", "seeds": 3},
              {"corpus": "small_parallel_enja", "baseline": "rnnsearch", "system": "rnn_h_distortion", "seeds": 2},
              {"corpus": "small_parallel_enja", "baseline": "baseline", "system": "exgre", "first_pass": True},
              {"corpus": "multi30k", "baseline": "baseline", "system": "exgre_soft", "seeds": 6}]
    runs = replicate.pending_runs(claims, tmp_path / "hyps", {"small_parallel_enja": cpu_set})
    assert [str(run) for run in runs] == [  # no exgre (first pass only), no multi30k (not in this machine's sets)
        "enja_verdict rnnsearch.seed1", "enja_verdict both_res.seed1", "enja_verdict rnn_h_distortion.seed1",
        "enja_verdict baseline.seed2", "enja_verdict rnnsearch.seed2", "enja_verdict both_res.seed2",
        "enja_verdict rnn_h_distortion.seed2", "enja_verdict baseline.seed3", "enja_verdict both_res.seed3"]
    assert {run.set for run in runs} == {cpu_set}
    gpu = replicate.pending_runs(claims, tmp_path / "hyps", {"multi30k": SET})
    assert [str(run) for run in gpu] == [f"m30k_verdict {name}.seed{seed}" for seed in range(1, 7)
                                         for name in ("baseline", "exgre_soft")]


def test_pending_runs_of_the_claims_named_first_come_before_the_others_seed_by_seed(tmp_path):
    claims = [{"corpus": "multi30k", "baseline": "baseline", "system": "both_res", "seeds": 3},
              {"corpus": "multi30k", "baseline": "onebest", "system": "lattice", "seeds": 2},
              {"corpus": "multi30k", "baseline": "baseline", "system": "exgre_soft", "seeds": 3}]
    write_hyps(tmp_path / "hyps" / "multi30k" / SET, "baseline", 1, ["a"])
    runs = replicate.pending_runs(claims, tmp_path / "hyps", {"multi30k": SET}, first=("exgre_soft",))
    assert [str(run).split()[1] for run in runs] == [
        "exgre_soft.seed1", "baseline.seed2", "exgre_soft.seed2", "baseline.seed3", "exgre_soft.seed3",  # hurried
        "onebest.seed1", "both_res.seed1", "lattice.seed1", "onebest.seed2", "both_res.seed2", "lattice.seed2",
        "both_res.seed3"]  # then the others as ever: seed by seed, comparison systems first


def test_a_system_named_first_that_no_claim_is_on_stops_the_queue_naming_it():
    claims = [{"corpus": "multi30k", "baseline": "baseline", "system": "exgre_soft"}]
    with pytest.raises(SystemExit, match="--first exgre: no claim is on that system .*: exgre_soft"):
        replicate.check_first(claims, ["exgre_soft", "exgre"])


def test_pending_runs_add_the_seeds_an_inconclusive_claim_is_due_at(tmp_path):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    folder = tmp_path / "hyps" / "multi30k" / SET
    for seed, cut in ((1, 1), (2, 3)):  # the system's two seeds are the baseline's, swapped: a gain of 0
        write_hyps(folder, "baseline", seed, [" ".join(r.split()[:-cut]) for r in refs])
        write_hyps(folder, "exgre_soft", seed, [" ".join(r.split()[:-(4 - cut)]) for r in refs])
    claim = {"corpus": "multi30k", "baseline": "baseline", "system": "exgre_soft", "seeds": 2}
    scores = verdicts.compare(claim, folder, corpora(tmp_path))
    sd = SeedTest(tuple(scores.base_bleu.values()), tuple(scores.system_bleu.values())).sd
    assert sd > 0.1
    for seeds, wanted in ((8, range(3, 9)), (40, range(0))):  # the paper's gain that 8 (40) seeds a side detect
        gain = min_detectable_gain(sd, seeds, seeds) * 1.0001
        runs = replicate.pending_runs([{**claim, "paper_gain": gain}], tmp_path / "hyps", {"multi30k": SET},
                                      corpora(tmp_path))
        assert [str(run) for run in runs] == [f"m30k_verdict {name}.seed{seed}" for seed in wanted
                                              for name in ("baseline", "exgre_soft")], seeds
        comparison = verdicts.compare({**claim, "paper_gain": gain}, folder, corpora(tmp_path))
        verdict = verdicts.verdict_cells(comparison, verdicts.seed_bleu_metric())[-1]
        assert verdict == ("pending (2 baseline, 2 system seeds of 8)" if wanted else "inconclusive"), seeds


def test_a_verdict_leaves_out_the_extra_seeds_another_claim_ran_on_a_shared_system(tmp_path):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    folder = tmp_path / "hyps" / "multi30k" / SET
    for seed in range(1, 5):  # baseline seeds 3 and 4 ran for another claim; seed 4 scores far higher
        write_hyps(folder, "baseline", seed, refs if seed == 4 else [" ".join(r.split()[:-seed]) for r in refs])
    for seed in (1, 2):
        write_hyps(folder, "both_res", seed, [" ".join(r.split()[:-(3 - seed)]) for r in refs])
    claim = {"paper": "001", "corpus": "multi30k", "baseline": "baseline", "system": "both_res", "seeds": 2}
    comparison = verdicts.compare(claim, folder, corpora(tmp_path))
    assert sorted(comparison.base) == sorted(comparison.base_bleu) == [1, 2] and comparison.ready
    result = comparison.result(verdicts.seed_bleu_metric())
    assert result.test.mean_gain == pytest.approx(0.0, abs=1e-9)  # the same two scores on each side
    assert verdicts.summary_row(comparison)[5] == "2 / 2"


def test_a_suite_that_needs_a_gpu_has_no_set_on_a_cpu(monkeypatch):
    monkeypatch.setattr(replicate, "training_device", lambda config: {"device": "cpu", "precision": "float32"})
    assert replicate.machine_set("wmt14_verdict", 1) is None
    assert replicate.machine_set("m30k_verdict", None).endswith("-t1-fp32")  # a CPU set of its own (issue 40)
    assert replicate.machine_set("enja_verdict", None).endswith("-t1-fp32")  # the suite's train.yaml: one thread
    assert replicate.machine_set("enja_verdict", 2).endswith("-t2-fp32")


def test_the_queue_runs_what_is_pending_and_leaves_a_run_another_process_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    monkeypatch.setattr(replicate, "machine_set", lambda suite, threads, budget: SET)
    monkeypatch.setattr(replicate, "commit_id", lambda: "0123abc")
    ran = []

    def run_system(runs, label):  # another process holds exgre.seed2; the others translate perfectly
        if label == "exgre.seed2":
            return False
        ran.append((runs.suite, label, runs.threads, runs.oracle))
        write_hyps(tmp_path / "hyps" / "multi30k" / SET, *verdicts.split_seed(label), ["a"])
        return True

    monkeypatch.setattr(replicate, "run_system", run_system)
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    replicate.work_queue(claims, None, 1)
    assert [label for _, label, _, _ in ran] == ["baseline.seed1", "exgre.seed1", "baseline.seed2"]
    assert ran[0] == ("m30k_verdict", "baseline.seed1", 1, False)
    assert [str(run) for run in replicate.selected_runs(claims, None, 1)] == ["m30k_verdict exgre.seed2"]
    assert replicate.selected_runs(claims, ["enja_verdict"], 1) == []  # only another suite's runs asked for


def test_the_queue_starts_no_run_once_its_minutes_to_start_have_passed(tmp_path, monkeypatch):
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    monkeypatch.setattr(replicate, "machine_set", lambda suite, threads, budget: SET)
    monkeypatch.setattr(replicate, "commit_id", lambda: "0123abc")
    clock = [1000.0]
    monkeypatch.setattr(replicate.time, "monotonic", lambda: clock[0])
    ran = []

    def run_system(runs, label):  # each run takes 3 minutes
        ran.append(label)
        clock[0] += 180
        write_hyps(tmp_path / "hyps" / "multi30k" / SET, *verdicts.split_seed(label), ["a"])
        return True

    monkeypatch.setattr(replicate, "run_system", run_system)
    claims = [{"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}]
    replicate.work_queue(claims, None, 1, start_within=5)
    assert ran == ["baseline.seed1", "exgre.seed1"]  # the third would start at minute 6
    replicate.work_queue(claims, None, 1, start_within=0)
    assert len(ran) == 2


def write_splits(corpus: Path, lines: dict[str, str]) -> None:
    """The m30k_verdict suite's split files (a run checks that each is there), ``lines[LANG]`` the one line of each."""
    corpus.mkdir()
    for name in ("train", "valid", "test2016"):
        for lang, line in lines.items():
            with gzip.open(corpus / f"{name}.{lang}.gz", "wt", encoding="utf-8") as handle:
                handle.write(f"{line}\n")


def test_a_run_another_process_holds_is_left_alone_and_a_recorded_one_not_trained_again(tmp_path, monkeypatch):
    corpus = tmp_path / "data"
    write_splits(corpus, {"en": "a man", "de": "ein Mann"})
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    monkeypatch.setattr(replicate, "commit_id", lambda: "0123456789abcdef")
    monkeypatch.setattr(replicate, "training_device", lambda config: {"device": "NVIDIA H200", "precision": "bfloat16"})
    calls = []
    monkeypatch.setattr(replicate, "prepare", lambda *args: calls.append("prepare"))
    monkeypatch.setattr(replicate, "keep_test_links", lambda *args: None)
    monkeypatch.setattr(replicate, "train", lambda *args: calls.append("train"))

    def record(run_dir, settings, sources, hyps_path, settings_path):
        calls.append(("record", sources, settings["overrides"][-1], settings["commit"], settings["data"]))
        write_hyps(hyps_path.parent, settings["system"], settings["seed"], ["ein Mann"])

    monkeypatch.setattr(replicate, "record", record)
    runs = replicate.SuiteRuns("m30k_verdict", data_dir=corpus, work=tmp_path / "work", threads=1)
    with replicate.folder_lock(tmp_path / "work" / "runs" / SET / "0123456789ab" / "exgre.seed1") as held:
        assert held and replicate.run_system(runs, "exgre.seed1") is False
    assert calls == []
    assert replicate.run_system(runs, "exgre.seed1") is True
    assert calls == ["prepare", "train", ("record", ["a man"], "train.seed=1", "0123456789abcdef", "data")]
    assert (tmp_path / "hyps" / "multi30k" / SET / "exgre.seed1.txt").exists()  # in its set's folder
    assert replicate.run_system(runs, "exgre.seed1") is True and len(calls) == 3  # recorded: nothing to do

    monkeypatch.setattr(replicate, "oracle_corpus", lambda *args: corpus)
    monkeypatch.setattr(replicate, "record", lambda run_dir, settings, *args: calls.append(("record", settings["system"])))
    assert replicate.run_system(dataclasses.replace(runs, oracle=True), "baseline.seed1") is True
    assert calls[-1] == ("record", "oracle_baseline")  # its settings name the system as its files do


def test_a_run_whose_preparation_drew_other_alignments_than_its_set_is_not_trained(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "data"
    write_splits(corpus, {"en": "a", "de": "a"})
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    monkeypatch.setattr(replicate, "commit_id", lambda: "0123456789abcdef")
    monkeypatch.setattr(replicate, "training_device", lambda config: {"device": "NVIDIA H200", "precision": "bfloat16"})
    for step in ("prepare", "keep_test_links"):
        monkeypatch.setattr(replicate, step, lambda *args: None)
    trained = []
    monkeypatch.setattr(replicate, "train", lambda suite, label, *args: trained.append(label))
    monkeypatch.setattr(replicate, "record", lambda *args: None)
    tokens = {"data": "t" * 64, "data_lattice": "l" * 64}  # this machine's preparations: the same tokens, ...

    def data_hashes(data, fields):  # ... and another alignment draw
        return {"tokens": tokens[data.name], **{field: f"new-{field}" for field in fields}}

    monkeypatch.setattr(replicate, "data_hashes", data_hashes)
    folder = tmp_path / "hyps" / "multi30k" / SET
    folder.mkdir(parents=True)
    recorded = {"data": "data", "data_hashes": {"tokens": "t" * 64, "reorder_positions": "old-reorder_positions"}}
    (folder / "exgre_soft.seed1.yaml").write_text(yaml.safe_dump(recorded))
    (folder / "lattice_lpe_lsa.seed1.yaml").write_text(yaml.safe_dump(
        {"data": "data_lattice", "data_hashes": {"tokens": "l" * 64, "lattice_end": "new-lattice_end"}}))
    runs = replicate.SuiteRuns("m30k_verdict", data_dir=corpus, work=tmp_path / "work", threads=1)
    assert replicate.run_system(runs, "refsr_soft.seed2") is False  # reads the alignments: another draw here
    out = capsys.readouterr().out
    assert trained == [] and "refsr_soft.seed2: not run: reorder_positions of data hashes to new-reorder_ here" in out
    assert "to old-reorder_ in its recorded runs" in out and "retire the set" in out
    assert replicate.run_system(runs, "baseline.seed2") is True  # the tokens alone: the same preparation
    assert replicate.run_system(runs, "lattice_lpe_lsa.seed2") is True  # its tokens against its own folder's runs
    (folder / "lattice_lpe_lsa.seed1.yaml").write_text(yaml.safe_dump(
        {"data": "data_lattice", "data_hashes": {"tokens": "l" * 64, "lattice_end": "old-lattice_end"}}))
    assert replicate.run_system(runs, "lattice_lpe_lsa.seed3") is False  # a lattice field that differs: refused too
    assert trained == ["baseline.seed2", "lattice_lpe_lsa.seed2"]


def test_prepare_readies_each_prepare_config_of_a_suite_once_without_training(tmp_path, monkeypatch):
    corpus = tmp_path / "data"
    write_splits(corpus, {"en": "a", "de": "a"})
    prepared = []
    monkeypatch.setattr(replicate, "prepare", lambda config, spec, data_dir, out: prepared.append((config.name, out)))
    monkeypatch.setattr(replicate, "train", lambda *args: pytest.fail("prepare trains nothing"))
    runs = replicate.SuiteRuns("m30k_verdict", data_dir=corpus, work=tmp_path / "work")
    folders = replicate.prepare_suite(runs)  # needs no GPU, though the suite does
    configs = [config for config, _ in prepared]
    assert configs == ["prepare.yaml", "prepare_lattice.yaml", "prepare_spm8k.yaml"], "each config once"
    work = tmp_path / "work"
    assert folders == [out for _, out in prepared] == [work / "data", work / "data_lattice", work / "data_spm8k"]
    missing = replicate.SuiteRuns("m30k_verdict", data_dir=tmp_path / "nowhere", work=tmp_path / "work")
    with pytest.raises(SystemExit, match="give its corpus folder with --data-dir"):
        replicate.prepare_suite(missing)


def test_tables_refuse_a_comparison_whose_runs_differ_in_commit_or_data_and_mark_the_first_pass(tmp_path):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k" / SET
    for system, seed in (("baseline", 1), ("baseline", 2), ("exgre", 1), ("exgre", 2)):
        write_hyps(hyps, system, seed, [*refs[:-1], " ".join(refs[-1].split()[:-seed])])  # seeds differ
        (hyps / f"{system}.seed{seed}.yaml").write_text(yaml.safe_dump(exchangeable()), encoding="utf-8")
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}

    def verdict_cell() -> str:
        comparisons = verdicts.comparisons_of([claim], tmp_path / "hyps", corpora(tmp_path))
        assert [c.folder.name for c in comparisons] == [SET]
        return verdicts.claim_row(comparisons[0])[-1]

    assert not verdict_cell().startswith("refused")
    (hyps / "exgre.seed2.yaml").write_text(yaml.safe_dump(exchangeable(threads=4)), encoding="utf-8")
    assert not verdict_cell().startswith("refused")  # threads do not change a GPU's computation
    (hyps / "exgre.seed2.yaml").write_text(yaml.safe_dump(exchangeable(commit="3b097d2aaaa")), encoding="utf-8")
    assert verdict_cell() == "refused: runs differ in commit (238c92a, 3b097d2)"
    (hyps / "exgre.seed2.yaml").write_text(yaml.safe_dump(exchangeable(data_hash="cd" * 32)), encoding="utf-8")
    assert verdict_cell() == f"refused: runs differ in data hash of data ({'ab' * 6}, {'cd' * 6})"
    (hyps / "exgre.seed2.yaml").write_text(yaml.safe_dump(exchangeable(data="data_lattice", data_hash="cd" * 32)),
                                           encoding="utf-8")
    assert not verdict_cell().startswith("refused")  # other data by design: another prepare config
    cpu = {"device": "cpu", "cpu": {"model": "AMD EPYC", "family": "25", "model_number": "1"}, "precision": "float32"}
    assert verdicts.differences([exchangeable(**cpu, threads=1), exchangeable(**cpu, threads=2)]) == [
        "threads (1, 2)"]
    first_pass = tmp_path / "hyps" / "multi30k" / "first_pass"
    for system, seed, commit in (("baseline", 1, "e984310"), ("baseline", 2, "53a3aae"), ("exgre", 1, "9734536")):
        write_hyps(first_pass, system, seed, [*refs[:-1], " ".join(refs[-1].split()[:-seed])])
        (first_pass / f"{system}.seed{seed}.yaml").write_text(yaml.safe_dump({"commit": commit, "train_minutes": 50.0}),
                                                                   encoding="utf-8")
    assert [c.folder.name for c in verdicts.comparisons_of([claim], tmp_path / "hyps", corpora(tmp_path))] == [SET]
    marked = verdicts.comparisons_of([{**claim, "first_pass": True, "seeds": 1}], tmp_path / "hyps", corpora(tmp_path))
    row = verdicts.claim_row(marked[0])
    assert row[3] == "first pass (mixed commits and machines)"
    assert not row[-1].startswith(("refused", "pending"))  # mixed commits, but exempt from the refusal


def test_a_retired_set_gets_no_verdict_rows_and_no_more_runs_and_the_queue_says_why(tmp_path, monkeypatch, capsys):
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k" / SET
    for system in ("baseline", "exgre"):
        write_hyps(hyps, system, 1, refs)
        (hyps / f"{system}.seed1.yaml").write_text(yaml.safe_dump(exchangeable()), encoding="utf-8")
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    monkeypatch.setattr(replicate, "machine_set", lambda suite, threads, budget: SET)
    assert [c.folder.name for c in verdicts.comparisons_of([claim], tmp_path / "hyps", corpora(tmp_path))] == [SET]
    assert [str(run) for run in replicate.selected_runs([claim], None, 1)][:2] == [
        "m30k_verdict baseline.seed2", "m30k_verdict exgre.seed2"]
    (hyps / verdicts.RETIRED).write_text("superseded by another set\n", encoding="utf-8")
    (row,) = [verdicts.claim_row(c) for c in verdicts.comparisons_of([claim], tmp_path / "hyps", corpora(tmp_path))]
    assert row[3] == verdicts.NO_SET and row[-1].startswith("pending (0 baseline, 0 system")
    assert replicate.selected_runs([claim], None, 1) == []
    assert f"multi30k/{SET} is retired, no runs for it: superseded by another set" in capsys.readouterr().out


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


def test_a_checkout_with_uncommitted_code_is_refused(tmp_path, monkeypatch):
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "ordo").mkdir()
    (tmp_path / "ordo" / "model.py").write_text("x = 1\n", encoding="utf-8")
    git("init", "-q")
    git("add", "ordo")
    git("commit", "-q", "-m", "first")
    monkeypatch.setattr(replicate, "ROOT", tmp_path)
    monkeypatch.delenv("ORDO_COMMIT", raising=False)
    head = replicate.commit_id()
    assert len(head) == 40
    (tmp_path / "notes.txt").write_text("outside ordo/ and recipes/\n", encoding="utf-8")
    assert replicate.commit_id() == head
    (tmp_path / "ordo" / "model.py").write_text("x = 2\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=f"differ from HEAD {head[:7]} \\(ordo/model.py\\): commit first"):
        replicate.commit_id()
    git("checkout", "ordo/model.py")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "new.py").write_text("\n", encoding="utf-8")  # untracked code counts too
    with pytest.raises(SystemExit, match="commit first"):
        replicate.commit_id()
    monkeypatch.setenv("ORDO_COMMIT", "0123abc")
    assert replicate.commit_id() == "0123abc"
    with pytest.raises(SystemExit, match=f"imports ordo from .*, not from {tmp_path}: run it with PYTHONPATH="):
        replicate.check_ordo_source()  # the ordo this process runs is another checkout's


def test_the_settings_name_the_device_cpu_and_data_and_the_set_they_belong_to(tmp_path, monkeypatch):
    monkeypatch.setattr(replicate.gemm, "cpuinfo", lambda: {"flags": "fpu avx2 fma"})  # no native bf16
    assert replicate.training_device({"device": "cpu", "amp": "auto"}) == {"device": "cpu", "precision": "float32"}
    assert replicate.training_device({"device": "cpu", "amp": "bf16"}) == {"device": "cpu", "precision": "bfloat16"}
    monkeypatch.setattr(replicate.gemm, "cpuinfo", lambda: {
        "model name": "Intel(R) Xeon(R) Platinum 8480C @ 2.00GHz", "cpu family": "6", "model": "143",
        "flags": "fpu avx2 avx512f amx_bf16 amx_tile"})
    assert replicate.training_device({"device": "cpu", "amp": "auto"}) == {"device": "cpu", "precision": "bfloat16"}
    machine = replicate.machine_settings({"device": "cpu", "threads": 1, "cpu_gemm": "blas", "amp": "off"})
    assert machine == {"threads": 1, "device": "cpu", "precision": "float32", "cpu_gemm": "blas",
                       "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480C @ 2.00GHz", "family": "6",
                               "model_number": "143", "avx2": True, "avx512f": True, "amx_tile": True}}
    assert replicate.set_name(machine) == "cpu-intel-xeon-platinum-8480c-6-143-t1-fp32"
    amd = {**machine, "cpu": {"model": "AMD EPYC", "family": "25", "model_number": "1"}}
    assert replicate.set_name(amd) == "cpu-amd-epyc-25-1-t1-fp32"
    assert replicate.set_name({**machine, "device": "NVIDIA H200", "precision": "bfloat16"}) == SET
    data = tmp_path / "data"
    data.mkdir()
    for name, text in (("data.yaml", "splits: {}"), ("spm.model", "v"), ("train.src.bin", "1"),
                       ("train.field.reorder_pos.idx", "2"), ("test.src.bin", "3"), ("train.src.txt", "t")):
        (data / name).write_text(text, encoding="utf-8")
    first = replicate.data_hash(data)
    assert len(first) == 64
    (data / "test.src.bin").write_text("4", encoding="utf-8")  # the test split and the text do not train
    (data / "train.src.txt").write_text("u", encoding="utf-8")
    assert replicate.data_hash(data) == first
    (data / "train.field.reorder_pos.idx").write_text("5", encoding="utf-8")  # other alignments: other data
    assert replicate.data_hash(data) != first


def prepared_copy(folder: Path, sentences: list[str]) -> Path:
    """A prepared data folder's training files in ``folder``: a SentencePiece model trained there from a file, as
    ordo's earlier commits trained it (its bytes name the file's path), data.yaml with that model's byte
    digest, token and reorder-position arrays."""
    folder.mkdir()
    text = folder / "train.txt"
    text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(folder / "spm"), vocab_size=40,
                                   hard_vocab_limit=False, minloglevel=2)
    digest = hashlib.sha256((folder / "spm.model").read_bytes()).hexdigest()
    (folder / "data.yaml").write_text(yaml.safe_dump({"src_vocab": "spm.model", "vocab_sha256": digest}),
                                      encoding="utf-8")
    for name, value in (("train.src.bin", "1 2 3"), ("train.field.reorder_positions.bin", "1 3 2")):
        (folder / name).write_text(value, encoding="utf-8")
    return folder


def test_data_hashes_agree_across_folders_and_on_what_a_run_reads(tmp_path):
    sentences = ["a cat sat on the mat", "the dog ran to the cat", "a mat on a dog"] * 20
    first, second = prepared_copy(tmp_path / "one", sentences), prepared_copy(tmp_path / "elsewhere", sentences)
    assert (first / "spm.model").read_bytes() != (second / "spm.model").read_bytes()  # the folder is in the bytes
    assert replicate.data_hash(first) != replicate.data_hash(second)
    assert replicate.data_hashes(first, []) == replicate.data_hashes(second, [])
    assert set(replicate.data_hashes(first, ["reorder_positions"])) == {"tokens", "reorder_positions"}
    (second / "train.field.reorder_positions.bin").write_text("2 1 3", encoding="utf-8")  # another alignment draw
    assert replicate.data_hashes(first, []) == replicate.data_hashes(second, [])  # a baseline reads no field
    redrawn = replicate.data_hashes(second, ["reorder_positions"])
    assert redrawn["tokens"] == replicate.data_hashes(first, ["reorder_positions"])["tokens"]
    assert redrawn["reorder_positions"] != replicate.data_hashes(first, ["reorder_positions"])["reorder_positions"]
    (second / "train.src.bin").write_text("1 2 4", encoding="utf-8")
    assert replicate.data_hashes(first, [])["tokens"] != replicate.data_hashes(second, [])["tokens"]
    suite = replicate.RECIPES / "m30k_verdict"
    assert replicate.fields_read(suite, []) == ()
    assert replicate.fields_read(suite, ["model.methods.exgre.weight=0.6"]) == ("reorder_positions",)
    assert replicate.fields_read(suite, ["model.methods.reorder_emb.variant=both"]) == ()
    assert replicate.fields_read(suite, ["model.methods.refsr=null"]) == ("reorder_positions",)  # on, its defaults


def test_a_comparison_is_refused_only_for_data_its_runs_read(tmp_path):
    tokens, draw, other_draw = "ab" * 32, "cd" * 32, "ef" * 32
    baseline = exchangeable(system="baseline", data_hash="11" * 32, data_hashes={"tokens": tokens})
    method = exchangeable(system="exgre", data_hash="22" * 32,
                          data_hashes={"tokens": tokens, "reorder_positions": draw})
    assert verdicts.differences([baseline, method]) == []
    redrawn = {**method, "data_hash": "33" * 32, "data_hashes": {"tokens": tokens, "reorder_positions": other_draw}}
    assert verdicts.differences([baseline, method, redrawn]) == [
        f"reorder_positions hash of data ({'cd' * 6}, {'ef' * 6})"]
    retokenized = {**baseline, "data_hashes": {"tokens": "99" * 32}}
    assert verdicts.differences([baseline, retokenized]) == [f"tokens hash of data ({'99' * 6}, {'ab' * 6})"]
    older = exchangeable(system="baseline", data_hash="44" * 32)  # recorded before data_hashes: all its bytes
    assert verdicts.differences([older, method]) == [f"data hash of data ({'22' * 6}, {'44' * 6})"]


def test_rehash_adds_the_hashes_of_what_each_run_read_where_its_data_is_here(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    data = prepared_copy(work / "data", ["a cat sat on the mat", "the dog ran to the cat"] * 20)
    folder = tmp_path / "hyps" / "multi30k" / SET
    folder.mkdir(parents=True)
    method = ["model.methods.exgre.weight=0.6", "model.methods.exgre.hard_window=false"]
    written = {"baseline.seed1": (replicate.data_hash(data), ["train.seed=1"]),
               "exgre_soft.seed1": (replicate.data_hash(data), [*method, "train.seed=1"]),
               "exgre_soft.seed2": ("ee" * 32, [*method, "train.seed=2"]),  # prepared elsewhere: not here
               "exgre_tuned.seed1": (replicate.data_hash(data), ["model.methods.exgre=null"])}  # the record's own
    for label, (full, overrides) in written.items():
        settings = exchangeable(data_hash=full, overrides=overrides)
        (folder / f"{label}.yaml").write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    assert replicate.rehash("m30k_verdict", work, tmp_path / "hyps") == [
        folder / "baseline.seed1.yaml", folder / "exgre_soft.seed1.yaml", folder / "exgre_tuned.seed1.yaml"]
    assert set(read_yaml(folder / "exgre_tuned.seed1.yaml")["data_hashes"]) == {"tokens", "reorder_positions"}
    baseline, method = read_yaml(folder / "baseline.seed1.yaml"), read_yaml(folder / "exgre_soft.seed1.yaml")
    assert baseline["data_hashes"] == replicate.data_hashes(data, [])
    assert method["data_hashes"] == replicate.data_hashes(data, ["reorder_positions"])
    assert list(method)[list(method).index("data_hash") + 1] == "data_hashes"
    assert "data_hashes" not in read_yaml(folder / "exgre_soft.seed2.yaml")
    assert replicate.rehash("m30k_verdict", work, tmp_path / "hyps") == []  # nothing left to add


def test_a_series_claim_is_judged_and_run_in_its_own_sets_alone(tmp_path, monkeypatch):
    """A claim pre-registered for a new set (its ``series``) is judged on SET.SERIES alone, where no other claim
    is, and ``run --series`` records there; before, a second set of one machine kind had no folder of its own."""
    refs = ROTATIONS * 2
    write_refs(tmp_path / "data", refs)
    hyps = tmp_path / "hyps" / "multi30k"
    series_set = verdicts.series_set(SET, "s13")
    assert series_set == f"{SET}.s13" and verdicts.folder_series(hyps / series_set) == "s13"
    assert verdicts.folder_series(hyps / SET) is None
    for folder, seeds in ((SET, (1, 2)), (series_set, (1,))):
        for system in ("baseline", "exgre_soft"):
            for seed in seeds:
                write_hyps(hyps / folder, system, seed, refs)
                (hyps / folder / f"{system}.seed{seed}.yaml").write_text(yaml.safe_dump(exchangeable()), "utf-8")
    plain = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre_soft",
             "seeds": 2}
    series = {**plain, "claim": "c, a second set", "series": "s13", "seeds": 3}
    compared = verdicts.comparisons_of([plain, series], tmp_path / "hyps", corpora(tmp_path))
    assert [(c.claim["claim"], c.folder.name) for c in compared] == [("c", SET), ("c, a second set", series_set)]
    assert [c.ready for c in compared] == [True, False]
    assert verdicts.verdict_cells(compared[1], verdicts.seed_bleu_metric())[-1] == (
        "pending (1 baseline, 1 system seeds of 3)")
    assert replicate.pending_runs([plain, series], tmp_path / "hyps", {"multi30k": SET}, corpora(tmp_path)) == []
    runs = replicate.pending_runs([plain, series], tmp_path / "hyps", {"multi30k": series_set}, corpora(tmp_path))
    assert [(str(run), run.set) for run in runs] == [(f"m30k_verdict {name}.seed{seed}", series_set)
                                                     for seed in (2, 3) for name in ("baseline", "exgre_soft")]
    monkeypatch.setattr(replicate, "HYPS", tmp_path / "hyps")
    monkeypatch.setattr(replicate, "machine_set", lambda suite, threads, budget: SET)
    assert [run.set for run in replicate.selected_runs([plain, series], None, 1, series="s13")] == [series_set] * 4
    verdicts.check_series([plain, series], "s13")
    verdicts.check_series([plain, series], None)
    with pytest.raises(SystemExit, match="--series s31: no claim pre-registers that series .*: s13"):
        verdicts.check_series([plain, series], "s31")
    monkeypatch.setattr(replicate, "training_device", lambda config: {"device": "NVIDIA H200", "precision": "bfloat16"})
    monkeypatch.setenv("ORDO_COMMIT", "0123abc")
    planned = replicate.plan_run(replicate.SuiteRuns("m30k_verdict", series="s13"), "baseline.seed2")
    assert planned.set == series_set and planned.run_dir.parts[-3:] == (series_set, "0123abc", "baseline.seed2")
