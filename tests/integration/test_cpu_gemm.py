"""Training and translating with float32 linear layers on oneDNN (``train.cpu_gemm`` / ``decode.cpu_gemm``) give
the results of torch's own path."""

import pytest

from ordo import gemm
from ordo.cli import main
from ordo.data.textio import read_lines

needs_onednn = pytest.mark.skipif(not gemm.onednn_available(), reason="this torch has no oneDNN linear kernel")


@needs_onednn
def test_training_on_onednn_follows_the_blas_run(train_tiny, onednn_calls):
    blas = train_tiny("train.cpu_gemm=blas", "train.amp=off", steps=60, name="blas")  # float32 (not auto's bf16)
    assert onednn_calls == []
    onednn = train_tiny("train.cpu_gemm=onednn", "train.amp=off", steps=60, name="onednn")
    assert len(onednn_calls) > 60, "every update's products went to oneDNN"
    assert onednn == pytest.approx(blas, rel=1e-5), "the same dev losses up to float32 rounding"
    assert onednn[-1] < onednn[0]


@needs_onednn
def test_translation_on_onednn_matches_blas(loaded_run, small_test_sources, onednn_calls):
    blas = loaded_run.translate(small_test_sources, beam_size=4, cpu_gemm="blas")
    assert onednn_calls == []
    onednn = loaded_run.translate(small_test_sources, beam_size=4, cpu_gemm="onednn")
    assert onednn_calls, "the search's products went to oneDNN"
    same = sum(a == b for a, b in zip(onednn, blas))
    assert same >= len(blas) - 1, "the same translations (a near tie may round apart)"
    assert gemm._active == "blas", "the setting ends with the call"


@needs_onednn
def test_ordo_translate_takes_the_backend_from_the_command_line(trained_run, small_data, tmp_path, onednn_calls):
    outputs = {}
    for backend in ("blas", "onednn"):
        out = tmp_path / backend
        assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input",
                     str(small_data / "test.src.txt"), "--output", str(out), "--device", "cpu",
                     "--cpu-gemm", backend]) == 0
        outputs[backend] = read_lines(out)
        assert bool(onednn_calls) == (backend == "onednn")
    same = sum(a == b for a, b in zip(outputs["onednn"], outputs["blas"]))
    assert same >= len(outputs["blas"]) - 1


@needs_onednn
def test_translation_on_timed_auto_matches_blas_and_times_each_shape_once(loaded_run, small_test_sources,
                                                                         monkeypatch):
    monkeypatch.setattr(gemm, "_choices", {})
    monkeypatch.setattr(gemm, "_timings", {})
    monkeypatch.setattr(gemm, "_decided_by_threads", {})
    monkeypatch.setattr(gemm, "TIMING_AFTER_S", 0.0)  # each key tried after its first product
    monkeypatch.setattr(gemm, "RETRY_AFTER_S", 0.0)  # ... and again at once where the rule's backend won
    blas = loaded_run.translate(small_test_sources, beam_size=4, cpu_gemm="blas")
    assert gemm._choices == {} and gemm._timings == {}
    for _ in range(2 * (2 + gemm.TRIAL_RUNS)):  # a key used once a call (an encoder layer's) needs a few calls
        auto = loaded_run.translate(small_test_sources, beam_size=4, cpu_gemm="auto")
        if not gemm._timings:
            break
    choices = dict(gemm._choices)
    assert choices and set(choices.values()) <= {"blas", "onednn"}, "each product shape timed and decided"
    assert loaded_run.translate(small_test_sources, beam_size=4, cpu_gemm="auto") == auto
    assert gemm._choices == choices, "decided once per process"
    same = sum(a == b for a, b in zip(auto, blas))
    assert same >= len(blas) - 1, "the same translations (a near tie may round apart)"
