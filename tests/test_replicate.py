"""recipes/replicate.py: the verdict rule, a verdicts row rebuilt from hypothesis files, claims that name real
systems."""

import gzip
import sys
from pathlib import Path

import pytest
import yaml

from ordo.data.textio import read_yaml

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
sys.path.insert(0, str(RECIPES))
import replicate


@pytest.mark.parametrize(("gains", "sd", "expected"), [
    ([1.0, 1.2], 0.3, "confirmed"),                     # mean 1.1 > 0.6, both positive
    ([0.5, 0.5], 0.3, "not confirmed at this scale"),   # 0.5 < 2 sd
    ([2.0, -0.1], 0.1, "not confirmed at this scale"),  # signs differ
    ([-1.0, -0.9], 0.2, "reversed"),
])
def test_the_verdict_rule(gains, sd, expected):
    assert replicate.verdict(gains, sd) == expected


def test_a_system_seed_is_recorded_under_its_full_name(tmp_path):
    assert replicate.record_paths(tmp_path, "baseline.seed2") == (tmp_path / "baseline.seed2.txt",
                                                                  tmp_path / "baseline.seed2.yaml")


def write_hyps(folder: Path, system: str, seed: int, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{system}.seed{seed}.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def test_a_row_is_rebuilt_from_the_hypothesis_files_alone(tmp_path):
    words = ["ein", "Mann", "fährt", "mit", "dem", "Fahrrad", "über", "eine", "Brücke", "am", "Abend"]
    refs = [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 4  # 44 distinct-enough sentences
    corpus = tmp_path / "data" / "multi30k"
    corpus.mkdir(parents=True)
    with gzip.open(corpus / "test2016.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{ref}\n" for ref in refs))
    hyps = tmp_path / "hyps" / "multi30k"
    for seed, cut in ((1, 3), (2, 4), (3, 5)):  # baselines drop a few words at the end, differently per seed
        write_hyps(hyps, "baseline", seed, [" ".join(r.split()[:-cut]) for r in refs])
    claim = {"paper": "p", "claim": "c", "corpus": "multi30k", "baseline": "baseline", "system": "exgre"}
    pending = replicate.claim_row(claim, tmp_path / "hyps", tmp_path / "data")
    assert pending[-1] == "pending (3 baseline, 0 system seeds)"
    write_hyps(hyps, "exgre", 1, refs)  # the references themselves: BLEU 100 on every seed
    one_of_two = replicate.claim_row(claim, tmp_path / "hyps", tmp_path / "data")
    assert one_of_two[-1] == "pending (3 baseline, 1 system seeds)"
    one_seed = replicate.claim_row({**claim, "seeds": 1}, tmp_path / "hyps", tmp_path / "data")  # an upper bound
    assert one_seed[-1] == "confirmed" and one_seed[7].startswith("+")
    write_hyps(hyps, "exgre", 2, refs)
    row = replicate.claim_row(claim, tmp_path / "hyps", tmp_path / "data")
    assert row[4] == "100.00, 100.00" and row[-1] == "confirmed"
    assert row[5] == "- / -"  # no settings files written here
    system_ribes, base_ribes = (float(r) for r in row[6].split(" / "))
    assert system_ribes == pytest.approx(100.0) and base_ribes < 100.0
    assert float(row[9]) < 0.01  # bootstrap over 88 pooled sentences
    gains = [float(g) for g in row[7].split("(")[1].rstrip(")").split(", ")]
    assert len(gains) == 2 and gains[0] < gains[1]  # seed 2's baseline dropped more words


def test_every_claim_names_systems_of_its_corpus_verdict_suite():
    claims = yaml.safe_load((RECIPES / "verdicts.yaml").read_text(encoding="utf-8"))
    for claim in claims:
        spec = replicate.suite_of(claim["corpus"])
        suite = next(p.parent for p in RECIPES.glob("*_verdict/suite.yaml") if read_yaml(p) == spec)
        systems = read_yaml(suite / "systems.yaml")
        for name in (claim["baseline"], claim["system"]):
            assert name.removeprefix("oracle_") in systems, (claim, name)



def test_the_results_table_is_replaced_in_place_and_a_missing_one_is_an_error(tmp_path):
    table = "| claim | verdict |\n|---|---|\n| ExGRE | confirmed |\n"
    document = "# Verdicts\n\n| claim | verdict |\n|---|---|\n| ExGRE | pending |\n| ReFSR | pending |\n\nRuns so far.\n"
    assert replicate.replace_table(document, table, tmp_path / "R.md") == (
        "# Verdicts\n\n| claim | verdict |\n|---|---|\n| ExGRE | confirmed |\n\nRuns so far.\n")
    with pytest.raises(replicate.ConfigError, match="R.md: no table with the header '| claim | verdict |'"):
        replicate.replace_table("# Verdicts\n", table, tmp_path / "R.md")
