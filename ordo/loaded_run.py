"""A trained run loaded to translate and score: :class:`LoadedRun` (model, config, vocabularies, a lattice run's
segmenters) from :func:`load_run`, or several runs as one ensemble from :func:`load_ensemble`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from ordo.checkpoint import load_checkpoint
from ordo.config import ExperimentConfig, build_config, replace_checked
from ordo.data.corpus import META_NAME, load_vocabs
from ordo.data.lattice.corpus import LatticeEncoder
from ordo.data.shards import vocab_digest
from ordo.data.source import EncodedSource, LongLines, SourceEncoder, model_inputs, refuse_over_long
from ordo.data.textio import read_yaml
from ordo.data.vocab import TokenVocab, Vocab
from ordo.decoding.ensemble import Ensemble
from ordo.decoding.packed import freeze_linear_layers
from ordo.decoding.scoring import PairScore, score_rows
from ordo.decoding.search import Hypothesis
from ordo.decoding.translator import translate_rows
from ordo.detail import Candidate, ForcedPass, TranslationDetail, describe, forced_passes
from ordo.device import resolve_device
from ordo.errors import CheckpointError, ConfigError
from ordo.models.outputs import Seq2SeqModel
from ordo.run_dir import build_for_data, resolve_checkpoint, run_data_meta


@dataclass
class LoadedRun:
    """A trained model ready to translate: model, config, vocabularies, and the segmenters of a run trained
    on lattices (paper 002), which turn raw text into lattices on the fly."""

    model: nn.Module
    cfg: ExperimentConfig
    src_vocab: Vocab | TokenVocab
    tgt_vocab: Vocab
    device: torch.device
    lattice: LatticeEncoder | None = None

    def encode_sources(self, sentences: list[str], source: str = "input") -> list[np.ndarray]:
        """Source token rows; an over-long sentence is an error naming ``source`` and its (1-based) line."""
        return self.encode_inputs(sentences, source)[0]

    def encode_inputs(
        self, sentences: list[str], source: str = "input", long_lines: LongLines = "error", first_line: int = 1
    ) -> tuple[list[np.ndarray], dict[str, list[np.ndarray]]]:
        """Source token rows and per-token fields (a lattice run's spans, paper 002 §3); a sentence (or lattice) over
        ``model.max_positions - 1`` pieces (edges) is an error naming ``source`` and its line, or with
        ``long_lines="truncate"`` is cut to that limit with a warning (:func:`ordo.data.source.model_inputs`)."""
        encoder = SourceEncoder(self.src_vocab, self.lattice)
        return model_inputs(encoder, sentences, source, self.cfg.model.max_positions - 1, long_lines, first_line)

    def encode_targets(self, sentences: list[str], target: str = "target", first_line: int = 1) -> list[np.ndarray]:
        """Target token rows (without EOS); a sentence over the most pieces the model's decoder can read
        (``Seq2SeqModel.max_output_tokens``: a Transformer's ``model.max_positions - 1``, the smallest of an
        ensemble's members'; the rnn family has no limit) is an error naming ``target`` and its line."""
        target_ids = self.tgt_vocab.encode_batch(sentences)
        limit = cast(Seq2SeqModel, self.model).max_output_tokens
        if limit is not None:
            labels = [f"{target}:{line}" for line in range(first_line, first_line + len(sentences))]
            refuse_over_long([EncodedSource(ids) for ids in target_ids], labels, limit, "pieces")
        return [np.asarray(ids, dtype=np.int64) for ids in target_ids]

    def score(
        self, sources: list[str], targets: list[str], progress: Callable[[int], object] | None = None,
        files: tuple[str, str] = ("source", "target"), first_line: int = 1, **decode: Any
    ) -> list[PairScore]:
        """log P(target | source) of each pair under the model (an ensemble's: its members' mean probability per
        token), natural log over the target's pieces and EOS (:mod:`ordo.decoding.scoring`), with the number of tokens it sums over; ``decode`` overrides DecodeConfig
        fields (``amp``, ``cpu_gemm``, ``max_tokens``). ``files`` name the two sides in errors, whose line
        ``first_line`` the first pair is; ``progress`` is called with the number of pairs done after each batch.

        Raises:
            ConfigError: when the lists differ in length.
            InputError: a side over the model's length (never cut: the score would be of another sentence).
        """
        if len(sources) != len(targets):
            raise ConfigError(f"{files[0]} has {len(sources)} lines but {files[1]} has {len(targets)}")
        cfg = replace_checked(self.cfg.decode, "decode", **decode)
        src_rows, fields = self.encode_inputs(sources, files[0], "error", first_line)
        tgt_rows = self.encode_targets(targets, files[1], first_line)
        return score_rows(self.model, src_rows, tgt_rows, cfg, self.device, fields, progress)

    def translate_hypotheses(
        self, sentences: list[str], progress: bool | Callable[[int], object] = False, source: str = "input",
        first_line: int = 1, **decode: Any
    ) -> list[list[Hypothesis]]:
        """N-best hypotheses (token ids) for each sentence; ``decode`` overrides DecodeConfig fields.

        A blank sentence gets one empty hypothesis; one over the model's length is cut, or refused with
        ``long_lines="error"`` (``source`` and ``first_line`` name it). ``progress``: a progress bar on stderr,
        or a function called with the number of sentences done after each batch.
        """
        cfg = replace_checked(self.cfg.decode, "decode", **decode)
        rows, fields = self.encode_inputs(sentences, source, cfg.long_lines, first_line)
        if not callable(progress):
            with tqdm(total=len(rows), disable=not progress, unit="sent", leave=False) as bar:
                return translate_rows(self.model, rows, cfg, self.device, fields, bar.update)
        return translate_rows(self.model, rows, cfg, self.device, fields, progress)

    def translate(self, sentences: list[str], **decode: Any) -> list[str]:
        """Detokenized best translation of each sentence (an empty or blank sentence gives an empty output)."""
        return [self.detokenize(hyps[0]) for hyps in self.translate_hypotheses(sentences, **decode)]

    def translate_detailed(
        self, sentences: list[str], attention: bool = True, references: list[str] | None = None, **decode: Any
    ) -> list[TranslationDetail]:
        """Each sentence's translation with its n-best list, pieces and, with ``attention``, the attention of its
        best translation, word links, Kendall's τ, the source in the translation's order and ExGRE/ReFSR's
        predicted positions (:mod:`ordo.detail`); ``references`` (one per sentence) add sentence RIBES.

        Translations are those of :meth:`translate` (same search, same batching); ``decode`` overrides
        DecodeConfig fields, and blank and over-long sentences are handled as there.

        Raises:
            ConfigError: when ``references`` is not one per sentence.
        """
        if references is not None and len(references) != len(sentences):
            raise ConfigError(f"references: {len(references)} given for {len(sentences)} sentences")
        if isinstance(self.model, Ensemble):
            raise ConfigError("translate_detailed reads one model's attention: load a single run (load_run), "
                              "not an ensemble")
        cfg = replace_checked(self.cfg.decode, "decode", **decode)
        rows, fields = self.encode_inputs(sentences, "input", cfg.long_lines)
        hyps = translate_rows(self.model, rows, cfg, self.device, fields)
        tgt_rows = [np.asarray(h[0].tokens, dtype=np.int64) for h in hyps]
        forced = (forced_passes(self.model, rows, tgt_rows, self.device, fields, cfg.max_tokens) if attention
                  else [ForcedPass() for _ in rows])
        return [
            describe(sentence, self.detokenize(hs[0]), [Candidate(self.detokenize(h), h.score) for h in hs],
                     self.source_pieces(sentence, row), self.tgt_vocab.pieces(hs[0].tokens), passed,
                     None if references is None else references[index])
            for index, (sentence, row, hs, passed) in enumerate(zip(sentences, rows, hyps, forced))
        ]

    def source_pieces(self, sentence: str, row: np.ndarray) -> list[str]:
        """The strings of a source row the model read: the sentence's own characters where SentencePiece
        split it (an unknown piece shows what it stands for), else the vocabulary's pieces (lattice edges, a
        token vocabulary, a row cut to the model's length)."""
        if self.lattice is None and isinstance(self.src_vocab, Vocab):
            pieces = self.src_vocab.text_pieces(sentence)
            if len(pieces) == len(row):
                return pieces
        return self.src_vocab.pieces(row.tolist())

    def detokenize(self, hyp: Hypothesis) -> str:
        """Text of one hypothesis."""
        return self.tgt_vocab.decode(hyp.tokens)


def load_weights(model: nn.Module, weights: dict[str, torch.Tensor], path: Path, config_path: Path) -> None:
    """Copy a checkpoint's ``weights`` (read from ``path``) into ``model``, built from ``config_path``.

    Raises:
        CheckpointError: naming both files and the first differences (parameters missing from the checkpoint,
            parameters the model has not got, shapes that differ) when the weights are another model's.
    """
    own = model.state_dict()
    differences = [f"{name} missing" for name in own if name not in weights]
    differences += [f"{name} not in the model" for name in weights if name not in own]
    differences += [f"{name} {tuple(weights[name].shape)} in the checkpoint, {tuple(tensor.shape)} in the model"
                    for name, tensor in own.items() if name in weights and weights[name].shape != tensor.shape]
    if differences:
        shown = "; ".join(differences[:3]) + (f"; and {len(differences) - 3} more" if len(differences) > 3 else "")
        raise CheckpointError(f"{path}: does not match the model of {config_path} ({shown})")
    model.load_state_dict(weights)


def load_run(run_dir: str | Path, checkpoint: str = "best", device: str = "auto", int8: bool = False) -> LoadedRun:
    """Load a trained run for translation (weights only, frozen: no optimizer state is needed).

    With ``int8`` the model's projections are dynamically quantized to int8 for CPU translation
    (:func:`ordo.decoding.quantize.quantize_int8`); ``device`` must then resolve to the CPU. Else, on a CPU, a
    linear layer whose products run on oneDNN holds its weight's packed copy alone
    (:func:`ordo.decoding.packed.freeze_linear_layers`): reading its ``weight`` gives the plain one back.
    """
    run_dir = Path(run_dir)
    config_path = run_dir / "config.yaml"
    if not config_path.exists():
        raise CheckpointError(f"{run_dir}: not an ordo run directory (no config.yaml)")
    cfg = build_config(read_yaml(config_path), str(config_path))
    meta = run_data_meta(run_dir)
    src_vocab, tgt_vocab = load_vocabs(run_dir, meta)
    if not isinstance(tgt_vocab, Vocab):
        raise CheckpointError(f"{run_dir / META_NAME}: the target vocabulary must be a SentencePiece model")
    lattice = LatticeEncoder.load(run_dir / meta.src_lattice) if meta.src_lattice else None
    model = build_for_data(cfg, meta).model
    checkpoint_path = resolve_checkpoint(run_dir, checkpoint)
    load_weights(model, load_checkpoint(checkpoint_path, mmap=True)["model"], checkpoint_path, config_path)
    target = resolve_device("cpu" if int8 and device == "auto" else device)
    model = model.to(target).eval().requires_grad_(False)  # for translation: frozen (ordo.gemm keeps it packed)
    if int8:
        from ordo.decoding.quantize import quantize_int8

        model = quantize_int8(model)
    elif target.type == "cpu":
        model = freeze_linear_layers(model)
    return LoadedRun(model, cfg, src_vocab, tgt_vocab, target, lattice)


def load_ensemble(
    run_dirs: Sequence[str | Path], checkpoint: str = "best", device: str = "auto", int8: bool = False
) -> LoadedRun:
    """Load several trained runs to translate as one ensemble (:mod:`ordo.decoding.ensemble`): at every search
    step the mean of their probabilities. ``checkpoint``, ``device`` and ``int8`` apply to every run; one run is
    exactly :func:`load_run`.

    The result is the first run's (config, decode settings, vocabularies, lattice segmenters) with the
    :class:`~ordo.decoding.ensemble.Ensemble` as its model, and ``model.max_positions`` the smallest of the runs'
    (the longest source every member can read).

    Raises:
        ConfigError: naming the first run and another one when their source input (lattices or plain text), source
            or target vocabulary or lattice segmenters differ; or when no run is given.
    """
    if not run_dirs:
        raise ConfigError("an ensemble needs at least one run directory")
    first_dir = Path(run_dirs[0])
    for run_dir in run_dirs[1:]:  # before any model is loaded
        difference = _input_difference(first_dir, Path(run_dir))
        if difference:
            raise ConfigError(f"{first_dir} and {run_dir} cannot be ensembled: {difference}")
    runs = [load_run(run_dir, checkpoint, device, int8) for run_dir in run_dirs]
    if len(runs) == 1:
        return runs[0]
    max_positions = min(run.cfg.model.max_positions for run in runs)
    cfg = dataclasses.replace(runs[0].cfg, model=dataclasses.replace(runs[0].cfg.model, max_positions=max_positions))
    return dataclasses.replace(runs[0], model=Ensemble([run.model for run in runs]), cfg=cfg)


def _input_difference(first: Path, other: Path) -> str:
    """What differs between two runs in what their models read and write (empty when nothing does): lattice or
    plain-text source, the source or target vocabulary, the lattice segmenters."""
    first_meta, other_meta = run_data_meta(first), run_data_meta(other)
    if bool(first_meta.src_lattice) != bool(other_meta.src_lattice):
        reads = {True: "lattices", False: "plain text"}
        return (f"the first reads {reads[bool(first_meta.src_lattice)]}, the other "
                f"{reads[bool(other_meta.src_lattice)]} as source")
    for side in ("src", "tgt"):
        first_file, other_file = (run / getattr(meta, f"{side}_vocab") for run, meta in
                                  ((first, first_meta), (other, other_meta)))
        if first_file.read_bytes() != other_file.read_bytes():
            return f"their {'source' if side == 'src' else 'target'} vocabularies differ"
    if vocab_digest(first, first_meta) != vocab_digest(other, other_meta):
        return "their lattice segmenters differ" if first_meta.src_lattice else "their joint/separate vocabularies differ"
    return ""
