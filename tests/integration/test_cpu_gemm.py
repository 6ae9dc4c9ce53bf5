"""Training and translating with float32 linear layers on oneDNN (``train.cpu_gemm`` / ``decode.cpu_gemm``) give
the results of torch's own path."""

import pytest

from ordo import gemm

needs_onednn = pytest.mark.skipif(not gemm.onednn_available(), reason="this torch has no oneDNN linear kernel")


@needs_onednn
def test_training_on_onednn_follows_the_blas_run(train_tiny, onednn_calls):
    blas = train_tiny("train.cpu_gemm=blas", steps=60, name="blas")
    assert onednn_calls == []
    onednn = train_tiny("train.cpu_gemm=onednn", steps=60, name="onednn")
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
