"""``ordo analyze`` (and the method fields it relies on) given runs and data that do not fit together: a clear
error naming the run or the directory, never a traceback."""

from pathlib import Path

import pytest

from ordo import api
from ordo.cli import main
from ordo.config import load_config
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.synthetic import write_corpus
from ordo.errors import ConfigError

TINY = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "model.share_embeddings=decoder",
        "train.max_tokens=600", "train.progress=false", "train.valid_bleu=false", "train.threads=1"]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    """200 synthetic pairs prepared twice: with source lattices of two SentencePiece models (``lattice``), and
    with word alignments and the ``reorder_positions`` field (``aligned``); their text files (``text``)."""
    root = tmp_path_factory.mktemp("corpora")
    splits = write_corpus(root / "text", {"train": 200, "valid": 20, "test": 20}, seed=3)
    files = {f"{split}_{side}": str(path) for split, paths in splits.items()
             for side, path in zip(("src", "tgt"), paths)}
    lattice = PrepareConfig(**files, out=str(root / "lattice"), vocab_size=100)
    lattice.lattice.segmenters = ["spm:60", "spm:100"]
    prepare(lattice, progress=False)
    prepare(PrepareConfig(**files, out=str(root / "aligned"), vocab_size=100, reorder_positions=True), progress=False)
    return {"lattice": root / "lattice", "aligned": root / "aligned", "text": root / "text"}


def train(data: Path, run: Path, *overrides: str) -> Path:
    """A tiny run of 2 updates on ``data``."""
    api.train(load_config(None, [f"data={data}", *TINY, "train.max_steps=2", "train.valid_every=2", *overrides]), run)
    return run


@pytest.fixture(scope="module")
def lattice_run(corpora, tmp_path_factory) -> Path:
    return train(corpora["lattice"], tmp_path_factory.mktemp("lattice_run") / "run", "model.methods.lattice_pe={}")


def test_sim_of_a_run_on_data_of_another_vocabulary_names_both(corpora, lattice_run, capsys):
    assert main(["analyze", "sim", "--run", f"lat={lattice_run}", "--data", str(corpora["aligned"]),
                 "--checkpoint", "last", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"{corpora['aligned']}: its vocabulary differs from the one run {lattice_run} was trained with" in err


def test_attention_of_a_lattice_run_is_refused_by_name(corpora, lattice_run, tmp_path, capsys):
    text = corpora["text"]
    assert main(["analyze", "attention", "--run", f"lat={lattice_run}", "--src", str(text / "test.src"),
                 "--ref", str(text / "test.tgt"), "--out", str(tmp_path), "--checkpoint", "last",
                 "--device", "cpu"]) == 2
    assert f"--run lat={lattice_run}: a lattice run's attention is over lattice edges" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("method", ["exgre", "refsr"])
def test_explicit_reordering_on_a_lattice_corpus_says_that_it_cannot_have_the_field(corpora, tmp_path, method):
    with pytest.raises(ConfigError, match="a lattice corpus cannot have it.*without --lattice"):
        train(corpora["lattice"], tmp_path / "run", f"model.methods.{method}={{}}")


def test_explicit_reordering_on_plain_data_says_how_to_prepare_the_field(small_data, tmp_path):
    with pytest.raises(ConfigError, match=r"\['reorder_positions'\].*prepare the data with --set reorder_positions"):
        train(small_data, tmp_path / "run", "model.methods.exgre={}")


def test_one_file_given_as_a_baseline_and_a_system_seed_is_named(tmp_path, capsys):
    ref, base, other = tmp_path / "ref.txt", tmp_path / "base.txt", tmp_path / "other.txt"
    ref.write_text("a b c d\nb c d e\n")
    base.write_text("a b c d\nb c e d\n")
    other.write_text("a b d c\nb c d e\n")
    assert main(["analyze", "seeds", "--ref", str(ref), "--baseline", str(base), "--baseline", str(other),
                 "--system", str(tmp_path / "." / "base.txt"), "--out", str(tmp_path / "out")]) == 2
    assert f"--system {tmp_path / '.' / 'base.txt'}: the same file as --baseline {base}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("analysis", ["systems", "robustness"])
def test_an_out_folder_that_is_a_file_is_named_before_any_run_translates(analysis, tmp_path, capsys):
    text, out = tmp_path / "text.txt", tmp_path / "out"
    text.write_text("a b\n")
    out.write_text("")
    assert main(["analyze", analysis, "--src", str(text), "--ref", str(text), "--run", f"a={tmp_path / 'no_run'}",
                 "--out", str(out)]) == 2
    assert f"--out {out}: is a file, not a folder" in capsys.readouterr().err


@pytest.fixture
def order_files(tmp_path) -> dict[str, Path]:
    """Two test pairs, a system's output, and their links (Pharaoh, 0-based) as the flags of ``analyze order``."""
    files = {"src": "a b c\nd e\n", "ref": "x y z\nv w\n", "hyp": "x z y\nv w\n", "align": "0-0 1-1 2-2\n0-1 1-0\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: tmp_path / name for name in files}


def order_flags(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["analyze", "order", "--src", str(files["src"]), "--ref", str(files["ref"]), "--hyp", f"sys={files['hyp']}",
            "--out", str(out), *extra]


def test_order_names_a_link_past_the_end_of_its_pair(order_files, tmp_path, capsys):
    bad = tmp_path / "bad.align"
    bad.write_text("0-0 1-1 2-2\n0-1 1-5\n")  # the second reference has 2 words
    assert main(order_flags(order_files, tmp_path / "out", "--align", str(bad))) == 2
    assert f"{bad}:2: link 1-5 is outside a pair of 2 and 2 words" in capsys.readouterr().err
    assert main(order_flags(order_files, tmp_path / "out", "--align", str(order_files["align"]),
                            "--hyp-align", f"sys={bad}")) == 2
    assert f"{bad}:2: link 1-5 is outside" in capsys.readouterr().err
    assert not (tmp_path / "out" / "order.md").exists()


def test_order_names_links_for_a_system_it_was_not_given(order_files, tmp_path, capsys):
    flags = order_flags(order_files, tmp_path / "out", "--align", str(order_files["align"]),
                        "--hyp-align", f"other={order_files['align']}")
    assert main(flags) == 2
    assert f"--hyp-align other={order_files['align']}: no --hyp is named 'other'" in capsys.readouterr().err
    assert main([*flags[:-1], f"sys={order_files['align']}"]) == 0
    assert (tmp_path / "out" / "order_tau.md").is_file()


@pytest.mark.parametrize("analysis", ["systems", "robustness"])
def test_a_beam_of_zero_is_a_usage_error_not_the_runs_own_beam(analysis, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", analysis, "--src", "s", "--ref", "r", "--out", "o", "--run", "a=run", "--beam", "0"])
    assert exit_.value.code == 2
    assert "argument --beam: 0 is below its minimum 1" in capsys.readouterr().err


@pytest.mark.parametrize("analysis", ["systems", "robustness", "attention"])
def test_a_later_run_without_its_checkpoint_is_named_before_the_first_translates(
        analysis, corpora, lattice_run, tmp_path, monkeypatch, capsys):
    from ordo.analysis import report, systems

    for module in (report, systems):
        monkeypatch.setattr(module, "load_run", lambda *a, **k: pytest.fail("loaded a run before the check"))
    no_config, no_steps = tmp_path / "empty", tmp_path / "unstarted"
    no_config.mkdir()
    no_steps.mkdir()
    (no_steps / "config.yaml").write_text((lattice_run / "config.yaml").read_text())
    text = corpora["text"]
    flags = ["analyze", analysis, "--src", str(text / "test.src"), "--ref", str(text / "test.tgt"),
             "--out", str(tmp_path / "out"), "--run", f"a={lattice_run}"]
    assert main([*flags, "--checkpoint", "last", "--run", f"b={no_config}"]) == 2
    assert f"--run b={no_config}: not an ordo run directory (no config.yaml)" in capsys.readouterr().err
    assert main([*flags, "--checkpoint", "last", "--run", f"b={no_steps}"]) == 2
    assert f"--run b={no_steps}: {no_steps / 'checkpoints'}: no step_N.pt checkpoints" in capsys.readouterr().err
    assert main([*flags, "--checkpoint", "averaged"]) == 2
    averaged = lattice_run / "checkpoints" / "averaged.pt"
    assert f"--run a={lattice_run}: {averaged}: no such checkpoint" in capsys.readouterr().err


def test_sim_names_a_later_run_without_its_checkpoint_before_the_first_is_measured(
        corpora, lattice_run, tmp_path, monkeypatch, capsys):
    from ordo.analysis import sim

    monkeypatch.setattr(sim, "load_run", lambda *a, **k: pytest.fail("loaded a run before the check"))
    assert main(["analyze", "sim", "--data", str(corpora["aligned"]), "--run", f"a={lattice_run}",
                 "--run", f"b={tmp_path}"]) == 2
    assert f"--run b={tmp_path}: not an ordo run directory (no config.yaml)" in capsys.readouterr().err


@pytest.mark.parametrize("side", ["src", "ref"])
def test_attention_over_an_over_long_line_names_its_file_and_line(side, corpora, tmp_path, capsys):
    run = train(corpora["aligned"], tmp_path / "run", "model.max_positions=128")
    files = {"src": tmp_path / "src.txt", "ref": tmp_path / "ref.txt"}
    for name, path in files.items():
        long = " ".join(["a"] * 150) if name == side else "a b"
        path.write_text(f"a b\n{long}\n")
    assert main(["analyze", "attention", "--run", f"t={run}", "--src", str(files["src"]), "--ref", str(files["ref"]),
                 "--out", str(tmp_path / "out"), "--line", "2", "--checkpoint", "last", "--device", "cpu"]) == 2
    assert f"{files[side]}:2: " in (err := capsys.readouterr().err) and "more than model.max_positions-1=127" in err


@pytest.mark.parametrize("side", ["src", "tgt"])
def test_align_with_a_model_over_an_over_long_line_names_its_file_and_line(side, corpora, tmp_path, capsys):
    """Before, an over-long target was named ``target:2``, not by its file."""
    run = train(corpora["aligned"], tmp_path / "run", "model.max_positions=128")
    files = {"src": tmp_path / "src.txt", "tgt": tmp_path / "tgt.txt"}
    for name, path in files.items():
        path.write_text("a b\n" + (" ".join(["a"] * 150) if name == side else "a b") + "\n")
    assert main(["align", "--model", str(run), "--checkpoint", "last", "--src", str(files["src"]),
                 "--tgt", str(files["tgt"]), "--out", str(tmp_path / "out.align")]) == 2
    assert f"{files[side]}:2: " in (err := capsys.readouterr().err) and "more than model.max_positions-1=127" in err
    assert not (tmp_path / "out.align").exists()
