"""ordo.provenance: each start of ``ordo train`` recorded in RUN/environment.yaml, and ``ordo analyze seeds``
refusing runs that differ in more than the seed."""

import shutil
import subprocess

import pytest
import torch

from ordo import api
from ordo.cli import main
from ordo.config import load_config
from ordo.errors import InputError
from ordo.provenance import (
    ENVIRONMENT_FILE,
    differences,
    environment,
    read_environment,
    record_start,
    source_commit,
)

TINY = ["model.preset=tiny", "model.d_model=16", "model.ffn_dim=32", "train.max_tokens=300", "train.warmup_steps=5",
        "train.progress=false", "train.valid_bleu=false", "train.threads=1", "train.device=cpu", "train.amp=off",
        "train.cpu_gemm=blas"]
ALIKE = {"ordo": "0.1.0", "commit": "abc", "torch": "2.13.0", "device": "CPU X (family 6 model 1)", "threads": 1,
         "precision": "float32", "cpu_gemm": "blas", "processes": 1}


def test_a_run_records_each_start_with_the_update_it_started_from(small_data, tmp_path):
    run = tmp_path / "run"
    api.train(load_config(None, [f"data={small_data}", *TINY, "train.max_steps=4", "train.valid_every=2"]), run)
    (first,) = read_environment(run)
    assert first["update"] == 0 and first["threads"] == 1 and first["precision"] == "float32"
    assert first["torch"] == str(torch.__version__) and first["processes"] == 1 and first["cpu_gemm"] == "blas"
    assert first["device"] == environment(torch.device("cpu"), None, "blas", 1)["device"]
    api.train(api.run_config(run, {"train": {"max_steps": 6}}), run)
    assert [record["update"] for record in read_environment(run)] == [0, 4]
    api.train(api.run_config(run, {"train": {"max_steps": 6}}), run)  # finished: nothing trains, nothing recorded
    assert len(read_environment(run)) == 2


def test_differences_name_each_field_value_and_run_and_runs_without_records():
    assert differences([("a", [ALIKE]), ("b", [ALIKE, {**ALIKE, "update": 100}])]) == []
    moved = {**ALIKE, "device": "CPU Y (family 25 model 1)", "threads": 2}
    found = differences([("a", [ALIKE]), ("b", [ALIKE, moved]), ("c", [])])
    assert found == ["device: CPU X (family 6 model 1) (a, b); CPU Y (family 25 model 1) (b)",
                     "threads: 1 (a, b); 2 (b)",
                     f"no {ENVIRONMENT_FILE} (trained before ordo recorded it): c"]


def test_records_append_atomically_and_a_broken_file_is_named(tmp_path):
    record_start(tmp_path, 0, ALIKE)
    record_start(tmp_path, 50, {**ALIKE, "threads": 2})
    assert [(r["update"], r["threads"]) for r in read_environment(tmp_path)] == [(0, 1), (50, 2)]
    (tmp_path / ENVIRONMENT_FILE).write_text("threads: 1\n")
    with pytest.raises(InputError, match=f"{tmp_path / ENVIRONMENT_FILE}: expected a list of records"):
        read_environment(tmp_path)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_names_uncommitted_changes_apart(tmp_path):
    package = tmp_path / "ordo"
    package.mkdir()
    assert source_commit(package) is None  # not a checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (package / "model.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert source_commit(package) == head
    (package / "model.py").write_text("x = 2\n")
    two = source_commit(package)
    (package / "model.py").write_text("x = 3\n")
    three = source_commit(package)
    assert two.startswith(f"{head}+changes-") and three.startswith(f"{head}+changes-") and two != three
    installed = tmp_path / "venv" / "site-packages" / "ordo"  # a virtualenv inside another project's checkout
    installed.mkdir(parents=True)
    assert source_commit(installed) is None


def seed_files(tmp_path, with_runs=True):
    """``analyze seeds`` arguments over three seeds a side, each with its run (records alike) when ``with_runs``."""
    refs = [f"the cat number {i} sat on the mat ." for i in range(30)]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    args = ["analyze", "seeds", "--ref", str(tmp_path / "ref"), "--out", str(tmp_path / "out"), "--tokenized-bleu"]
    for side, cuts in (("base", (3, 4, 5)), ("system", (0, 1, 2))):
        for seed, cut in enumerate(cuts, 1):
            hyp, run = tmp_path / f"{side}{seed}.txt", tmp_path / f"{side}{seed}"
            hyp.write_text("\n".join(" ".join(r.split()[:len(r.split()) - cut]) for r in refs) + "\n")
            record_start(run, 0, ALIKE)
            flag = "baseline" if side == "base" else "system"
            args += [f"--{flag}", str(hyp), *((f"--{flag}-run", str(run)) if with_runs else ())]
    return args


def verdict_row(tmp_path):
    header, row = ((tmp_path / "out" / "verdict.tsv").read_text().splitlines()[i].split("\t") for i in (0, 1))
    return dict(zip(header, row))


def test_analyze_seeds_refuses_runs_that_differ_in_more_than_the_seed(tmp_path, capsys):
    args = seed_files(tmp_path)
    assert main(args) == 0
    assert verdict_row(tmp_path)["runs' environments"] == "alike (6 starts of 6 runs)"
    record_start(tmp_path / "system2", 900, {**ALIKE, "device": "NVIDIA H100", "precision": "bfloat16"})
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "the runs differ in more than the seed" in err and f"NVIDIA H100 ({tmp_path / 'system2'})" in err
    assert "precision: float32" in err and "--allow-mixed" in err
    assert main([*args, "--allow-mixed"]) == 0
    assert verdict_row(tmp_path)["runs' environments"].startswith("differ: device: CPU X")
    without_one = args[:-2]  # the last --system-run left out: the runs no longer pair with the files
    assert main(without_one) == 2
    assert "--system-run: 2 runs for 3 output files" in capsys.readouterr().err


def test_analyze_seeds_without_runs_says_they_were_not_checked(tmp_path):
    assert main(seed_files(tmp_path, with_runs=False)) == 0
    assert verdict_row(tmp_path)["runs' environments"].startswith("not checked")
