"""The Python API behind every CLI verb: train a run, load it, translate strings, average checkpoints.

Example (in a notebook)::

    from ordo import api
    run = api.load_run("runs/multi30k")
    run.translate(["A man is riding a bike."], beam_size=5)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import torch
import yaml
from torch import nn
from tqdm import tqdm

from ordo.build import BuiltModel, build_model, count_parameters
from ordo.checkpoint import BEST_NAME, average_checkpoints, load_checkpoint, save_checkpoint, step_checkpoints
from ordo.config import ExperimentConfig, build_config, replace_checked, save_config
from ordo.data.alignment.reorder_field import FIELD as REORDER_FIELD
from ordo.data.corpus import LATTICE_DIR, META_NAME, DataMeta, TokenArray, load_vocabs
from ordo.data.lattice.corpus import LatticeEncoder
from ordo.data.shards import data_dirs, shard_metas, vocab_digest
from ordo.data.source import EncodedSource, LongLines, SourceEncoder, model_inputs, refuse_over_long
from ordo.data.textio import atomic_write, copy_tree_atomically, read_yaml
from ordo.data.vocab import TokenVocab, Vocab, load_vocab
from ordo.decoding.ensemble import Ensemble
from ordo.decoding.scoring import PairScore, score_rows
from ordo.decoding.search import Hypothesis
from ordo.decoding.translator import translate_rows
from ordo.detail import Candidate, ForcedPass, TranslationDetail, describe, forced_passes
from ordo.device import resolve_device
from ordo.errors import CheckpointError, ConfigError, InputError, TrainingInterrupted

if TYPE_CHECKING:
    from ordo.training.distributed import DistributedContext
    from ordo.training.progress import Progress

logger = logging.getLogger("ordo")
LOG_DATE = "%Y-%m-%d %H:%M:%S"  # the time at the head of each log line


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, so a later redirection (a notebook,
    pytest's capture) is honoured instead of a stream closed since set-up."""

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def setup_logging(log_file: Path | None = None, level: int = logging.INFO, rank: int | None = None) -> None:
    """Log ``ordo.*`` messages to stderr and, if given, to ``log_file`` (appending); ``rank``, given for one of
    several training processes, heads each stderr line (``rank 1 | ...``), so that a warning says which process
    gave it."""
    root = logging.getLogger("ordo")
    root.setLevel(level)
    stderr = [h for h in root.handlers if getattr(h, "_ordo_stderr", False)]
    if not stderr:
        stderr = [_StderrHandler()]
        stderr[0]._ordo_stderr = True  # type: ignore[attr-defined]
        root.addHandler(stderr[0])
    head = "" if rank is None else f"rank {rank} | "
    stderr[0].setFormatter(logging.Formatter(f"%(asctime)s | {head}%(name)s | %(message)s", LOG_DATE))
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        for h in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
            root.removeHandler(h)
            h.close()
        file_handler = logging.FileHandler(log_file, encoding="utf-8")
        file_handler.setFormatter(logging.Formatter("%(asctime)s | %(name)s | %(message)s", LOG_DATE))
        root.addHandler(file_handler)


def run_config(run_dir: Path, raw: dict[str, Any], where: str = "config") -> ExperimentConfig:
    """The config of a run: the saved ``config.yaml`` (when resuming) updated by ``raw``, validated; errors
    name ``where`` (what ``raw`` was read from, e.g. ``exp.yaml + --set``).

    The model section of a run cannot change once training started: one given again must build the saved model,
    compared whole where it names a preset, else as keys over the saved section (``--set model.d_model=16`` alone
    names the run's own width, not the default preset's model with that width).
    """
    saved_path = run_dir / "config.yaml"
    if not saved_path.exists():
        return build_config(raw, where)
    saved = read_yaml(saved_path)
    saved_model = build_config(saved, str(saved_path)).model
    merged = {**saved, **{k: v for k, v in raw.items() if k != "model"}}
    for section in ("train", "decode"):
        merged[section] = {**saved.get(section, {}), **raw.get(section, {})}
    cfg = build_config(merged, f"{where} over {saved_path}")
    warn_batch_changes(build_config(saved, str(saved_path)), cfg, saved_path)
    if raw.get("model"):
        given = raw["model"] if "preset" in raw["model"] else {**saved.get("model", {}), **raw["model"]}
        requested = build_config({"model": given}, where).model
        if requested != saved_model:
            raise ConfigError(f"{saved_path}: the run was started with a different model section; use a new run dir")
    return cfg


# the train settings that make an epoch's list of batches: a resumed run's place in its epoch is an index into it
BATCH_LIST_KEYS = ("seed", "max_tokens", "batch_by", "target_bucket", "pad_multiple")


def warn_batch_changes(saved: ExperimentConfig, cfg: ExperimentConfig, saved_path: Path) -> None:
    """Warn, naming each, of the settings of :data:`BATCH_LIST_KEYS` that a resumed run changes from its saved
    ``config.yaml``: the checkpoint's place in the epoch then indexes another list of batches, so the rest of that
    epoch may skip some sentences and repeat others, and the run will not repeat an uninterrupted one."""
    changed = [f"train.{key} ({getattr(saved.train, key)} -> {getattr(cfg.train, key)})" for key in BATCH_LIST_KEYS
               if getattr(saved.train, key) != getattr(cfg.train, key)]
    if changed:
        logger.warning("%s: resuming with %s changed: the rest of the current epoch follows another list of "
                       "batches (some sentences may be skipped or repeated until the epoch ends)", saved_path,
                       ", ".join(changed))


def _write_run_files(cfg: ExperimentConfig, run_dir: Path, params: int, meta: DataMeta, data_dir: Path) -> None:
    """The run's resolved ``config.yaml``, ``model_info.yaml`` (``params`` parameters) and its copy of the data's
    vocabularies and ``data.yaml``, each written atomically.

    Raises:
        InputError: naming the file or ``run_dir`` when one cannot be written (a full disk, no permission).
    """
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
        with atomic_write(run_dir / "model_info.yaml") as handle:
            yaml.safe_dump({"parameters": params, "methods": sorted(cfg.model.methods)}, handle)
        _copy_data_meta(meta, data_dir, run_dir)
    except OSError as err:
        raise InputError(f"{run_dir}: cannot write the run's files ({err.strerror or err})") from None


def _copy_data_meta(meta: DataMeta, data_dir: Path, run_dir: Path) -> None:
    """Copy the vocabularies (and a lattice corpus's segmenters) into the run, and the data's ``data.yaml``
    with its paths pointing at those copies, so that the run translates raw text without the data directory."""
    src_vocab = f"vocab/src{Path(meta.src_vocab).suffix}"
    for source, copy in ((meta.src_vocab, src_vocab), (meta.tgt_vocab, "vocab/tgt.model")):
        with atomic_write(run_dir / copy, "wb", encoding=None) as handle:  # a run's vocabulary is never half-written
            handle.write((data_dir / source).read_bytes())
    if meta.src_lattice:
        copy_tree_atomically(data_dir / meta.src_lattice, run_dir / LATTICE_DIR)  # never half-copied
    run_meta = dataclasses.replace(meta, src_vocab=src_vocab, tgt_vocab="vocab/tgt.model",
                                   src_lattice=LATTICE_DIR if meta.src_lattice else "")
    run_meta.save(run_dir)


def run_data_meta(run_dir: Path) -> DataMeta:
    """The ``data.yaml`` a run keeps (vocabulary paths relative to the run). A run trained before runs kept it
    gets the same from its ``vocab/`` files: joint when the source and target models are the same file, with the
    digest of those files."""
    if (run_dir / META_NAME).is_file():
        return DataMeta.load(run_dir)
    tokens = Path("vocab") / f"src{TokenVocab.SUFFIX}"
    src = tokens if (run_dir / tokens).is_file() else Path("vocab") / "src.model"
    tgt = Path("vocab") / "tgt.model"
    joint = (run_dir / src).read_bytes() == (run_dir / tgt).read_bytes()
    meta = DataMeta(src_lang="", tgt_lang="", joint_vocab=joint, src_vocab=str(src), tgt_vocab=str(tgt),
                    src_vocab_size=len(load_vocab(run_dir / src)), tgt_vocab_size=len(load_vocab(run_dir / tgt)),
                    src_lattice=LATTICE_DIR if (run_dir / LATTICE_DIR).is_dir() else "")
    meta.vocab_sha256 = vocab_digest(run_dir, meta)
    return meta


def check_run_vocabulary(run_dir: Path, data_dir: Path, meta: DataMeta) -> None:
    """Refuse to go on training a run that has checkpoints on data ``data_dir`` (whose ``data.yaml`` is ``meta``)
    of another vocabulary: training would replace the run's ``vocab/`` by that data's, which its weights were not
    trained with (an error on the embedding shapes when resuming, or at equal sizes a run that translates with
    the wrong pieces). Shards of the run's corpus (``ordo prepare --vocab-from``) share its vocabulary and pass.

    Raises:
        InputError: naming ``data_dir`` and ``run_dir``.
    """
    if not any((run_dir / "checkpoints").glob("*.pt")) or not (run_dir / "vocab").is_dir():
        return
    if vocab_digest(run_dir, run_data_meta(run_dir)) != vocab_digest(data_dir, meta):
        raise InputError(f"{data_dir}: its vocabulary differs from the one run {run_dir} was trained with; train "
                         f"a new run dir, or prepare the data with `ordo prepare --vocab-from {run_dir}`")


def check_positions(cfg: ExperimentConfig, dirs: list[Path], meta: DataMeta) -> None:
    """Refuse, before training, a training or dev row that the Transformer's position table cannot hold: a side of
    more than ``model.max_positions - 1`` pieces (EOS, or BOS, takes one position), which ``ordo prepare`` keeps in
    a dev set (and in a training set prepared with a ``max_len`` above it). A lattice source is left to its
    method, which checks its own positions; the rnn family has no position table.

    Args:
        cfg: the run's config.
        dirs: the training shards; the first one's dev split is checked too.
        meta: the first shard's ``data.yaml``.

    Raises:
        InputError: naming the ``{split}.{side}.txt`` file and line of the first such row.
    """
    if cfg.model.family != "transformer":
        return
    limit = cfg.model.max_positions - 1
    splits = [(data_dir, "train") for data_dir in dirs]
    splits += [(dirs[0], "valid")] if (dirs[0] / "valid.src.idx").is_file() else []
    sides = ("tgt",) if meta.src_lattice else ("src", "tgt")
    for data_dir, split in splits:
        for side in sides:
            lengths = TokenArray.open(data_dir / f"{split}.{side}").lengths
            over = np.flatnonzero(lengths > limit)
            if over.size:
                remedy = f"prepare with --max-len {limit}" if split == "train" else "drop them from the dev set"
                raise InputError(f"{data_dir / f'{split}.{side}.txt'}:{over[0] + 1}: {lengths[over[0]]} pieces, more "
                                 f"than model.max_positions-1={limit} ({over.size} such lines); raise "
                                 f"model.max_positions, or {remedy}")


def _missing_fields_message(data_dir: Path, meta: DataMeta, missing: list[str]) -> str:
    """The error for methods that need per-token batch fields ``missing`` that the training data ``data_dir``
    (whose ``data.yaml`` is ``meta``) lacks, with how to prepare it: ExGRE/ReFSR's ``reorder_positions`` (which a
    lattice corpus cannot have: it aligns the source's words, not lattice edges), or a lattice's spans."""
    message = f"{data_dir}: the methods need batch fields {missing} that this data has not got"
    if REORDER_FIELD in missing and meta.src_lattice:
        return (f"{message}: a lattice corpus cannot have it ({REORDER_FIELD} aligns the source's words, not lattice "
                "edges); train ExGRE/ReFSR on data prepared without --lattice, with --set reorder_positions=true")
    if REORDER_FIELD in missing:
        return f"{message}: prepare the data with --set reorder_positions=true"
    return f"{message}: prepare the data with --lattice SEGMENTERS"


def build_for_data(cfg: ExperimentConfig, meta: DataMeta) -> BuiltModel:
    """Build the model ``cfg.model`` describes for the vocabularies of ``meta``."""
    return build_model(cfg.model, meta.src_vocab_size, meta.tgt_vocab_size, meta.joint_vocab)


def train(cfg: ExperimentConfig, run_dir: str | Path) -> Progress:
    """Train (or resume) the run in ``run_dir``: saves the resolved config, vocabularies, parameter count
    and a log file there, then runs :class:`ordo.training.trainer.Trainer`. ``cfg.data`` may name several
    shards (``DIR1:DIR2:...``, :mod:`ordo.data.shards`): each must hold a training split and the first's
    vocabularies, or an InputError names it.

    The run directory is locked while it trains (:mod:`ordo.training.lock`), so a second training of the same run
    stops before writing anything there. Under torchrun rank 0 alone, the process that writes it, takes the lock,
    once every process has joined, and tells the others whether it could: refused, they all stop with its error.

    Raises:
        RunLocked: when another process is training in ``run_dir``, naming it (on every torchrun process).
    """
    from ordo.training.distributed import DistributedContext  # imported here, as the trainer: translating
    from ordo.training.lock import run_lock  # needs neither

    run_dir = Path(run_dir)
    dirs = data_dirs(cfg.data)
    metas = shard_metas(dirs)
    check_run_vocabulary(run_dir, dirs[0], metas[0])
    check_positions(cfg, dirs, metas[0])
    dist = DistributedContext(cfg.train.device)  # under torchrun: waits until every process has joined
    with contextlib.ExitStack() as lock:
        dist.on_main(lambda: lock.enter_context(run_lock(run_dir)))
        return _train_locked(cfg, run_dir, dirs, metas, dist)


def _train_locked(cfg: ExperimentConfig, run_dir: Path, dirs: list[Path], metas: list[DataMeta],
                  dist: DistributedContext) -> Progress:
    """:func:`train` once the run directory is locked: ``dirs`` are the training shards, ``metas`` their
    ``data.yaml``; ``dist`` the processes, of which rank 0 alone writes the run's files."""
    from ordo.training.trainer import Trainer  # imported here: translating needs neither it nor sacreBLEU

    data_dir, meta = dirs[0], metas[0]
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    setup_logging(run_dir / "train.log" if dist.is_main else None, logging.INFO if dist.is_main else logging.WARNING,
                  dist.rank if dist.world_size > 1 else None)
    torch.manual_seed(cfg.train.seed)
    built = build_for_data(cfg, meta)
    for shard_dir, shard_meta in zip(dirs, metas):
        missing = [f for f in built.fields if f not in shard_meta.fields.get("train", [])]
        if missing:
            raise ConfigError(_missing_fields_message(shard_dir, shard_meta, missing))
    params = count_parameters(built.model)
    logger.info("model: %s, %d parameters (%.2fM)", cfg.model.family, params, params / 1e6)
    dist.on_main(lambda: _write_run_files(cfg, run_dir, params, meta, data_dir))
    trainer = Trainer(built.model, cfg, run_dir, built.losses, built.fields, dist)
    interrupted: TrainingInterrupted | None = None
    try:
        progress = trainer.train()
    except TrainingInterrupted as err:  # every process stopped at the same update: they all close, as below
        interrupted = err.with_traceback(None)  # its frames hold the trainer
    # The trainer's DDP reducer lets go of the process group before the group is torn down: freed after it, a
    # process hung at the end of some runs. Not after other errors: tearing down while others are in a collective
    # can hang.
    del trainer
    dist.close()
    if interrupted is not None:
        raise interrupted
    return progress


def resolve_checkpoint(run_dir: Path, checkpoint: str) -> Path:
    """``best``, ``last``, ``averaged`` or a path, as the checkpoint file of ``run_dir``."""
    if checkpoint == "last":
        found = step_checkpoints(run_dir / "checkpoints")
        if not found:
            raise CheckpointError(f"{run_dir / 'checkpoints'}: no step_N.pt checkpoints")
        return found[-1]
    if checkpoint == "best":
        path = run_dir / "checkpoints" / BEST_NAME
        return path if path.exists() else resolve_checkpoint(run_dir, "last")
    if checkpoint == "averaged":
        return run_dir / "checkpoints" / "averaged.pt"
    return Path(checkpoint)


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
        """Target token rows (without EOS); a Transformer's sentence over ``model.max_positions - 1`` pieces is an
        error naming ``target`` and its line (the rnn family has no position table)."""
        target_ids = self.tgt_vocab.encode_batch(sentences)
        if self.cfg.model.family == "transformer":
            labels = [f"{target}:{line}" for line in range(first_line, first_line + len(sentences))]
            refuse_over_long([EncodedSource(ids) for ids in target_ids], labels, self.cfg.model.max_positions - 1,
                             "pieces")
        return [np.asarray(ids, dtype=np.int64) for ids in target_ids]

    def score(
        self, sources: list[str], targets: list[str], progress: Callable[[int], object] | None = None,
        files: tuple[str, str] = ("source", "target"), first_line: int = 1, **decode: Any
    ) -> list[PairScore]:
        """log P(target | source) of each pair under the model, natural log over the target's pieces and EOS
        (:mod:`ordo.decoding.scoring`), with the number of tokens it sums over; ``decode`` overrides DecodeConfig
        fields (``amp``, ``cpu_gemm``, ``max_tokens``). ``files`` name the two sides in errors, whose line
        ``first_line`` the first pair is; ``progress`` is called with the number of pairs done after each batch.

        Raises:
            ConfigError: when the lists differ in length, or the run is an ensemble.
            InputError: a side over the model's length (never cut: the score would be of another sentence).
        """
        if len(sources) != len(targets):
            raise ConfigError(f"{files[0]} has {len(sources)} lines but {files[1]} has {len(targets)}")
        if isinstance(self.model, Ensemble):
            raise ConfigError("score runs one model's forced decoding: load a single run (load_run), not an ensemble")
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
    (:func:`ordo.decoding.quantize.quantize_int8`); ``device`` must then resolve to the CPU.
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


def average(run_dir: str | Path, last: int = 5, output: str | Path | None = None) -> Path:
    """Average the weights of the last ``last`` periodic checkpoints into ``output``
    (default ``checkpoints/averaged.pt``), usable as ``--checkpoint averaged``.

    Raises:
        ConfigError: when ``last`` is below 1.
        CheckpointError: when the run has no periodic checkpoints, or they hold different parameters.
    """
    if last < 1:
        raise ConfigError(f"last: {last} is below its minimum 1 (the number of checkpoints to average)")
    run_dir = Path(run_dir)
    paths = step_checkpoints(run_dir / "checkpoints")[-last:]
    if not paths:
        raise CheckpointError(f"{run_dir / 'checkpoints'}: no step_N.pt checkpoints to average")
    if len(paths) < last:
        logger.warning("only %d checkpoints to average (asked for %d)", len(paths), last)
    weights = average_checkpoints(paths)
    target = Path(output) if output else run_dir / "checkpoints" / "averaged.pt"
    save_checkpoint({"model": weights, "averaged": [p.name for p in paths]}, target)
    return target

