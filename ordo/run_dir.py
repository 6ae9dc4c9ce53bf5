"""A run directory's own files: its config (a resumed run's, updated by new settings), its copy of the data's
vocabularies and ``data.yaml`` (so a run translates raw text without the data), the model they describe, and its
checkpoints by name."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import yaml

from ordo.build import BuiltModel, build_model
from ordo.checkpoint import BEST_NAME, step_checkpoints
from ordo.config import ExperimentConfig, build_config, save_config
from ordo.data.corpus import LATTICE_DIR, META_NAME, DataMeta
from ordo.data.shards import vocab_digest
from ordo.data.textio import atomic_write, copy_tree_atomically, read_yaml
from ordo.data.vocab import TokenVocab, load_vocab
from ordo.errors import CheckpointError, ConfigError, InputError

logger = logging.getLogger("ordo")


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


def write_run_files(cfg: ExperimentConfig, run_dir: Path, params: int, meta: DataMeta, data_dir: Path) -> None:
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


def build_for_data(cfg: ExperimentConfig, meta: DataMeta) -> BuiltModel:
    """Build the model ``cfg.model`` describes for the vocabularies of ``meta``."""
    return build_model(cfg.model, meta.src_vocab_size, meta.tgt_vocab_size, meta.joint_vocab)


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
