"""``ordo export --format ctranslate2``: CTranslate2 translates the exported weights as ordo does."""

import json

import pytest
import sentencepiece as spm

from ordo import api
from ordo.cli import main
from ordo.data.textio import read_lines

ctranslate2 = pytest.importorskip("ctranslate2")


def ordo_and_ct2(run, out, sources, beam):
    loaded = api.load_run(run, "last", "cpu")
    # both stop at 100 pieces: ordo then ends the hypothesis with EOS, CTranslate2 returns it without one
    ours = loaded.translate_hypotheses(sources, beam_size=beam, max_len_a=0.0, max_len_b=100, length_penalty=1.0)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=2)
    pieces = [loaded.src_vocab.pieces(loaded.src_vocab.encode(s)) for s in sources]
    theirs = translator.translate_batch(pieces, beam_size=beam, max_decoding_length=100, length_penalty=1.0)
    return [loaded.tgt_vocab.pieces(h[0].tokens) for h in ours], [r.hypotheses[0] for r in theirs]


def test_ctranslate2_gives_the_same_translations(trained_run, small_data, tmp_path):
    out = tmp_path / "ct2"
    assert main(["export", "--model", str(trained_run), "--format", "ctranslate2", "--out", str(out),
                 "--checkpoint", "last"]) == 0
    assert (out / "model.bin").exists()
    sources = read_lines(small_data / "test.src.txt")
    for beam in (1, 4):
        ours, theirs = ordo_and_ct2(trained_run, out, sources, beam)
        same = sum(a == b for a, b in zip(ours, theirs))
        assert same >= len(sources) - 2, (beam, same, len(sources))


def test_the_export_folder_translates_text_without_ordo(trained_run, small_data, tmp_path):
    """docs/cli.md's example: the folder's SentencePiece models and translate.json give ordo's translations
    (before, the pieces came from ``api.load_run``, so a served export still needed ordo and the run folder)."""
    out = tmp_path / "ct2"
    assert main(["export", "--model", str(trained_run), "--format", "ctranslate2", "--out", str(out),
                 "--checkpoint", "last"]) == 0
    loaded = api.load_run(trained_run, "last", "cpu")
    options = json.loads((out / "translate.json").read_text())
    assert options == {"beam_size": loaded.cfg.decode.beam_size, "length_penalty": loaded.cfg.decode.length_penalty,
                       "max_input_length": loaded.cfg.model.max_positions,
                       "max_decoding_length": min(256, loaded.cfg.model.max_positions - 1)}
    source, target = (spm.SentencePieceProcessor(model_file=str(out / f"{side}.model")) for side in ("source", "target"))
    sources = read_lines(small_data / "test.src.txt")
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=2)
    results = translator.translate_batch(source.encode(sources, out_type=str), **options)
    theirs = [target.decode(result.hypotheses[0]) for result in results]
    # ordo's own length bound (decode.max_len_a, max_len_b) has no CTranslate2 setting: the same bound here
    ours = loaded.translate(sources, max_len_a=0.0, max_len_b=options["max_decoding_length"])
    assert sum(a == b for a, b in zip(ours, theirs)) >= len(sources) - 2


@pytest.mark.parametrize(("setting", "message"), [
    ("model.methods.reorder_emb.variant=both", "methods change the network; this run uses reorder_emb"),
    # before: "only the baseline Transformer exports (not the rnn family)", future_cost having a model class of its own
    ("model.methods.future_cost.model=2", "methods change the network; this run uses future_cost"),
    ("model.preset=rnn-tiny", "only the baseline Transformer exports, not the rnn family's"),
], ids=["reorder_emb", "future_cost", "rnn"])
def test_a_model_with_a_method_or_another_network_does_not_export(setting, message, train_tiny, tmp_path, capsys):
    train_tiny(setting, steps=3, name="other")
    assert main(["export", "--model", str(tmp_path / "other"), "--format", "ctranslate2", "--out",
                 str(tmp_path / "o"), "--checkpoint", "last"]) == 2
    err = capsys.readouterr().err
    assert f"ordo export: error: {message}" in err and not (tmp_path / "o").exists()


def test_an_out_folder_that_is_not_an_export_is_refused_and_an_export_is_replaced(trained_run, tmp_path, capsys):
    """Before, CTranslate2's converter (force=True) deleted ``--out`` whole: ``--out RUN_DIR`` took the run's
    checkpoints with it."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    export = ["export", "--model", str(trained_run), "--format", "ctranslate2", "--checkpoint", "last", "--out"]
    assert main([*export, str(folder)]) == 2
    assert f"{folder}: a folder that is not a CTranslate2 model" in capsys.readouterr().err
    assert (folder / "notes.txt").read_text() == "mine\n"
    assert main([*export, str(trained_run)]) == 2
    assert (trained_run / "checkpoints").is_dir()
    out = tmp_path / "ct2"
    assert main([*export, str(out)]) == 0
    assert main([*export, str(out), "--quantization", "int8"]) == 0
    assert (out / "model.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "notes"]  # no temporary folder left


def test_an_over_long_source_is_cut_as_ordo_cuts_it_with_max_input_length(train_tiny, small_data, tmp_path):
    """docs/cli.md's call: ``max_input_length=model.max_positions`` (EOS included) cuts a long source where ordo
    does; CTranslate2's default (1024) runs past the exported position table of a smaller model."""
    train_tiny("model.max_positions=100", steps=3, name="short")
    out = tmp_path / "ct2"
    assert main(["export", "--model", str(tmp_path / "short"), "--format", "ctranslate2", "--out", str(out),
                 "--checkpoint", "last"]) == 0
    loaded = api.load_run(tmp_path / "short", "last", "cpu")
    long = " ".join(read_lines(small_data / "test.src.txt")[:12])
    pieces = loaded.src_vocab.pieces(loaded.src_vocab.encode(long))
    assert len(pieces) > 100
    ours = loaded.translate_hypotheses([long], beam_size=1, max_len_a=0.0, max_len_b=30)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    theirs = translator.translate_batch([pieces], beam_size=1, max_input_length=100, max_decoding_length=30)
    assert theirs[0].hypotheses[0] == loaded.tgt_vocab.pieces(ours[0][0].tokens)
    with pytest.raises(RuntimeError, match="No position encodings are defined for positions >= 100"):
        translator.translate_batch([pieces], beam_size=1, max_decoding_length=30)
