"""``ordo export --format ctranslate2``: a trained baseline Transformer as a CTranslate2 model directory.

CTranslate2 (Klein et al. 2020) runs the same weights with its own C++ kernels. The mapping, layer by
layer: packed QKV -> the fused self-attention projection, the cross-attention's packed KV -> its fused
key/value projection, each residual block's LayerNorm -> that block's layer norm (``pre_norm`` follows
``model.norm``), the sinusoidal table from position 1 on (ordo's first token gets PE(1), CTranslate2's
index 0), embeddings scaled by sqrt(d), the output projection without bias. Tokens are SentencePiece pieces;
the source gets </s> appended and decoding starts from <s>, as in ordo. Methods change the network, so only
the plain baseline exports.

Beside CTranslate2's files the folder holds what translating needs without ordo: the run's vocabulary files
(``source.model`` and ``target.model`` for SentencePiece, ``.tokens`` for a tokenized corpus's list) and
``translate.json``, the keyword arguments of ``Translator.translate_batch`` that bound lengths and search as
ordo does (:func:`translate_options`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ordo.api import LoadedRun, load_run
from ordo.errors import ConfigError, InputError, OrdoError
from ordo.models.attention import CrossAttention, SelfAttention
from ordo.models.transformer import FeedForward, Residual, TransformerModel


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def _linear(spec: Any, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _norm(spec: Any, block: Residual) -> None:
    spec.gamma = _array(block.norm.weight)
    spec.beta = _array(block.norm.bias)


def _self_attention(spec: Any, attention: SelfAttention, block: Residual) -> None:
    _linear(spec.linear[0], attention.qkv.weight, attention.qkv.bias)
    _linear(spec.linear[1], attention.out.weight, attention.out.bias)
    _norm(spec.layer_norm, block)


def _cross_attention(spec: Any, attention: CrossAttention, block: Residual) -> None:
    _linear(spec.linear[0], attention.q.weight, attention.q.bias)
    _linear(spec.linear[1], attention.kv.weight, attention.kv.bias)
    _linear(spec.linear[2], attention.out.weight, attention.out.bias)
    _norm(spec.layer_norm, block)


def _ffn(spec: Any, ffn: FeedForward, block: Residual) -> None:
    _linear(spec.linear_0, ffn.fc1.weight, ffn.fc1.bias)
    _linear(spec.linear_1, ffn.fc2.weight, ffn.fc2.bias)
    _norm(spec.layer_norm, block)


def check_exportable(run: LoadedRun) -> None:
    """Raise ConfigError unless ``run`` is a plain baseline Transformer, naming what it is instead: a run with
    methods (checked first: some give the Transformer a model class of their own), one that reads lattices, or
    one of another family."""
    if run.cfg.model.methods:
        raise ConfigError(f"methods change the network; this run uses {', '.join(run.cfg.model.methods)}")
    if run.lattice is not None:
        raise ConfigError("the run reads lattices (paper 002), which CTranslate2's SentencePiece input cannot give")
    if run.cfg.model.family != "transformer" or type(run.model) is not TransformerModel:
        raise ConfigError(f"only the baseline Transformer exports, not the {run.cfg.model.family} family's "
                          f"{type(run.model).__name__}")


def ctranslate2_spec(run: LoadedRun) -> Any:
    """The CTranslate2 ``TransformerSpec`` holding ``run``'s weights and vocabularies."""
    from ctranslate2.specs import transformer_spec

    check_exportable(run)
    cfg, model = run.cfg.model, run.model
    encoder: Any = model.encoder  # TransformerEncoder and TransformerDecoder (check_exportable)
    decoder: Any = model.decoder
    pre_norm = cfg.norm == "pre"
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers), cfg.heads, pre_norm=pre_norm
    )
    positions = _array(decoder.positions.table[1:])  # row p-1 holds PE(p)
    for side_spec, side in ((spec.encoder, encoder), (spec.decoder, decoder)):
        embeddings = side_spec.embeddings[0] if isinstance(side_spec.embeddings, list) else side_spec.embeddings
        embeddings.weight = _array(side.embed.weight)
        side_spec.scale_embeddings = True
        side_spec.position_encodings.encodings = positions
        if pre_norm:
            side_spec.layer_norm.gamma = _array(side.final_norm.weight)
            side_spec.layer_norm.beta = _array(side.final_norm.bias)
    for layer_spec, layer in zip(spec.encoder.layer, encoder.layers):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.attn_block)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_block)
    for layer_spec, layer in zip(spec.decoder.layer, decoder.layers):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.self_block)
        _cross_attention(layer_spec.attention, layer.cross_attn, layer.cross_block)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_block)
    output: Any = model.output
    spec.decoder.projection.weight = _array(output.weight)
    spec.register_source_vocabulary(run.src_vocab.all_pieces())
    spec.register_target_vocabulary(run.tgt_vocab.all_pieces())
    spec.config.add_source_eos = True
    spec.config.decoder_start_token = "<s>"
    return spec


def translate_options(run: LoadedRun) -> dict[str, Any]:
    """``Translator.translate_batch`` keywords that make CTranslate2 search as ``run`` does: its beam and length
    penalty (both normalise a score by length ** penalty), a source cut at ``model.max_positions`` tokens with the
    end-of-sentence token (ordo's ``max_positions - 1`` pieces), and outputs below the exported position table
    (CTranslate2's own default of 256 where the table is longer)."""
    positions = run.cfg.model.max_positions
    return {"beam_size": run.cfg.decode.beam_size, "length_penalty": run.cfg.decode.length_penalty,
            "max_input_length": positions, "max_decoding_length": min(256, positions - 1)}


def write_translation_files(run: LoadedRun, folder: Path) -> None:
    """Copy ``run``'s vocabulary files into ``folder`` as ``source.SUFFIX`` and ``target.SUFFIX`` and write
    :func:`translate_options` to ``translate.json``."""
    for side, vocab in (("source", run.src_vocab), ("target", run.tgt_vocab)):
        shutil.copyfile(vocab.path, folder / f"{side}{vocab.path.suffix}")
    (folder / "translate.json").write_text(json.dumps(translate_options(run), indent=2) + "\n", encoding="utf-8")


def check_output_dir(out: Path) -> None:
    """Refuse an ``--out`` that the export would destroy: a file, or a folder that holds something other than a
    CTranslate2 model (a run directory given by mistake, say), which it would replace whole.

    Raises:
        InputError: naming ``out``.
    """
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: is a file, not a directory for the CTranslate2 model")
    if out.is_dir() and any(out.iterdir()) and not (out / "model.bin").is_file():
        raise InputError(f"{out}: a folder that is not a CTranslate2 model (no model.bin) would be replaced whole; "
                         "name a new directory or an earlier export")


def write_directory(out: Path, write: Callable[[Path], None]) -> None:
    """Let ``write`` fill a new folder beside ``out``, then put it in place of ``out``: an export that fails or is
    interrupted leaves the earlier one (if any) as it was, and no half-written folder."""
    out.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    old = new.with_suffix(".old")
    try:
        write(new)
        if out.exists():
            out.rename(old)
        try:
            new.rename(out)
        except OSError:
            if old.exists():
                old.rename(out)
            raise
    finally:
        shutil.rmtree(new, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def export_ctranslate2(run_dir: str | Path, out: str | Path, checkpoint: str = "best",
                       quantization: str | None = None) -> Path:
    """Write ``run_dir``'s model (``checkpoint``) as a CTranslate2 model directory ``out``, with its vocabulary
    files and ``translate.json`` (:func:`write_translation_files`).

    The model is written beside ``out`` and put in its place when complete (:func:`write_directory`); an
    existing ``out`` must be an earlier export or empty (:func:`check_output_dir`).

    Raises:
        OrdoError: when the ``ctranslate2`` package is missing; ConfigError for a model that cannot export;
            InputError for an ``out`` that is not a CTranslate2 model directory.
    """
    try:
        from ctranslate2.converters.converter import Converter
    except ImportError:
        raise OrdoError("export --format ctranslate2 needs the ctranslate2 package: pip install ctranslate2") from None
    out = Path(out)
    check_output_dir(out)
    run = load_run(run_dir, checkpoint, "cpu")
    check_exportable(run)

    class RunConverter(Converter):  # type: ignore[misc]
        def _load(self) -> Any:
            return ctranslate2_spec(run)

    def write(folder: Path) -> None:
        RunConverter().convert(str(folder), quantization=quantization, force=True)
        write_translation_files(run, folder)

    write_directory(out, write)
    return out
