"""The pipeline behind ``ordo prepare``: check the text, train SentencePiece, binarize.

Steps, in order:

1. Every input file is read once, streaming, before anything is written (:mod:`ordo.data.prepare_config` checks the settings first): both sides of a split must exist,
   be valid UTF-8 and have the same number of lines; an empty (or whitespace-only) line is an error naming
   file:line unless ``empty_lines: skip``, which drops the pair and counts it.
2. SentencePiece is trained on a sample of the training pairs (one model for both sides, or one per side):
   all of them when their sentences number at most ``spm_input_sentence_size`` (two per pair for a joint
   model), else a uniform random sample of that many sentences (:func:`sample_flags`, seeded by ``seed``), as
   Marian and fairseq train on a bounded sample. The sampled pairs of the possibly gzipped inputs are streamed
   into temporary plain files in ``out``, removed afterwards. With ``vocab_from: DIR`` nothing is trained: DIR's
   models are copied and encode the corpus, which makes it a shard of DIR's corpus (:mod:`ordo.data.shards`).
3. Each split is encoded from its input files in chunks; training pairs outside the length limits are dropped
   and counted (validation and test pairs are kept, over-long ones only reported). The piece ids are streamed
   into token arrays (:class:`ordo.data.corpus.TokenArrayWriter`: rows appended to the ``.bin``, offsets to the
   ``.idx``) and the raw text of the kept pairs to ``{split}.src.txt``/``{split}.tgt.txt``.
4. With ``reorder_positions``, the kept pairs of every split are aligned and each split's ``{split}.align`` and
   ``reorder_positions`` field written (:mod:`ordo.data.alignment.reorder_field`).
5. ``data.yaml`` is written last, so a directory that has one is complete; it records a digest of the
   vocabulary files (:func:`ordo.data.shards.vocab_digest`).

Memory is therefore bounded whatever the corpus size: no step holds more than one chunk of ``CHUNK_LINES``
pairs, and SentencePiece's trainer, which holds its input and dominates the peak (about 1.3 KB per sentence
of 55 characters: 2.7 GB at the default 2,000,000 sentences, ``bench/results/prepare_scale.md``), sees at
most ``spm_input_sentence_size`` sentences.

With a ``lattice`` section (paper 002 §3) the source side is a lattice of several segmentations:
step 2 trains the target's SentencePiece model and the lattice directory (:mod:`ordo.data.lattice.corpus`),
step 3 writes every source as its lattice's edge ids with the per-edge fields ``lattice_start`` and
``lattice_end``, and skips (and counts) a pair whose lattice has more than ``lattice.max_edges`` edges.

Input may be raw or pre-tokenized text; either goes through SentencePiece as it is.
"""

from __future__ import annotations

import logging
import random
import shutil
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import islice, zip_longest
from pathlib import Path

from tqdm import tqdm

from ordo.data.corpus import LATTICE_DIR, META_NAME, DataMeta, TokenArrayWriter
from ordo.data.lattice.corpus import LatticeEncoder, train_lattice_encoder
from ordo.data.prepare_config import SPLITS, SPM_FILES, PrepareConfig, check_config, split_files
from ordo.data.shards import copy_vocabs, vocab_digest
from ordo.data.source import SourceEncoder
from ordo.data.textio import atomic_write, iter_lines
from ordo.data.vocab import NoTrainingText, TokenVocab, Vocab, train_sentencepiece
from ordo.errors import InputError

logger = logging.getLogger("ordo.data.prepare")

CHUNK_LINES = 10_000  # lines encoded per SentencePiece batch


@dataclass
class SplitStats:
    """Counts of one split, for the summary."""

    pairs: int = 0  # line pairs in the input files
    empty: int = 0  # pairs skipped because a side was empty
    kept: int = 0  # pairs written
    too_long: int = 0  # pairs with a side over max_len (dropped in train, kept elsewhere)
    too_short: int = 0  # train pairs with a side under min_len (dropped)
    bad_ratio: int = 0  # train pairs over max_len_ratio (dropped)
    too_many_words: int = 0  # pairs with a side over max_words words (dropped in train, kept elsewhere)
    lattice_too_long: int = 0  # pairs whose source lattice has more than lattice.max_edges edges (dropped)


def prepare(cfg: PrepareConfig, progress: bool = True) -> DataMeta:
    """Turn parallel text into a data directory that ``ordo train`` reads.

    Args:
        cfg: input files, output directory and filtering settings.
        progress: show tqdm progress bars on stderr.

    Returns:
        The metadata written to ``<out>/data.yaml``.

    Raises:
        ConfigError: for missing or inconsistent settings.
        InputError: naming the file (and line) for a missing file, unequal line counts, invalid UTF-8, an
            empty line (unless ``empty_lines: skip``), a split without pairs, or a training set that filtering
            leaves empty.
    """
    check_config(cfg)
    splits = split_files(cfg)
    stats = {name: check_parallel(src, tgt, cfg.empty_lines == "skip", progress) for name, (src, tgt) in splits.items()}
    if stats["train"].pairs - stats["train"].empty == 0:
        raise InputError(f"{cfg.train_src}: no sentence pairs to train on")
    for name, s in stats.items():
        if s.pairs - s.empty == 0:
            raise InputError(f"{splits[name][0]}: no sentence pairs in the {name} split (leave {name}_src and "
                             f"{name}_tgt out for none)")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    _remove_stale_outputs(out, splits)
    if cfg.vocab_from:
        src_vocab, tgt_vocab, lattice = copy_vocabs(Path(cfg.vocab_from), out)
        logger.info("vocabulary: the models of %s (vocab_size, joint_vocab, model_type and lattice unused)",
                    cfg.vocab_from)
    else:
        src_vocab, tgt_vocab, lattice = _learn_vocabs(cfg, splits["train"], stats["train"], out, progress)
    for name, files in splits.items():
        pairs = iter_pairs(*files, skip_empty=cfg.empty_lines == "skip")
        _encode_split(name, pairs, SourceEncoder(src_vocab, lattice), files[0], tgt_vocab, out, cfg, stats[name],
                      progress)
    if stats["train"].kept == 0:
        filters = "max_len, min_len, max_words" + (", lattice.max_edges" if lattice is not None else "")
        raise InputError(f"{cfg.train_src}: every pair was dropped by the length filters (see {filters})")
    meta = DataMeta(
        src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, joint_vocab=src_vocab is tgt_vocab,
        src_vocab=str(src_vocab.path.relative_to(out)), tgt_vocab=str(tgt_vocab.path.relative_to(out)),
        src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
        splits={name: s.kept for name, s in stats.items()},
        fields={name: list(SourceEncoder(src_vocab, lattice).field_names) for name in stats if lattice is not None},
        src_lattice=LATTICE_DIR if lattice is not None else "",
    )
    meta.vocab_sha256 = vocab_digest(out, meta)
    _log_summary(cfg, meta, stats)
    if cfg.reorder_positions:
        from ordo.data.alignment.reorder_field import align_and_store

        align_and_store(out, meta, cfg.aligner, cfg.symmetrization)
    meta.save(out)
    return meta


def _learn_vocabs(
    cfg: PrepareConfig, files: tuple[Path, Path], stats: SplitStats, out: Path, progress: bool
) -> tuple[Vocab | TokenVocab, Vocab, LatticeEncoder | None]:
    """Train the vocabularies on a sample of the training pairs ``files`` (whose counts ``stats`` holds):
    SentencePiece model(s), or a lattice directory and the target's model; returns ``(src_vocab, tgt_vocab,
    lattice)``, the same object twice for a joint model."""
    plain = (out / ".train.src.plain.tmp", out / ".train.tgt.plain.tmp")
    train_pairs = stats.pairs - stats.empty
    try:
        sample = sample_flags(train_pairs, spm_sample_pairs(cfg) or train_pairs, cfg.seed)
        _copy_pairs(files, plain, cfg.empty_lines == "skip", sample)
        if cfg.lattice.enabled:
            lattice = _train_lattice(cfg, plain, files, out, train_pairs, progress)
            return lattice.vocab, _train_target_vocab(cfg, plain[1], out), lattice
        src_vocab, tgt_vocab = _train_vocabs(cfg, plain, out)
        return src_vocab, tgt_vocab, None
    except NoTrainingText as err:
        raise NoTrainingText([files[plain.index(Path(path))] for path in err.files]) from None
    finally:
        for path in plain:
            path.unlink(missing_ok=True)


def check_parallel(src: Path, tgt: Path, skip_empty: bool, progress: bool = False) -> SplitStats:
    """Read both files once and check that they form a usable parallel corpus.

    Args:
        src: source text file (plain or .gz).
        tgt: target text file.
        skip_empty: count pairs with an empty side instead of failing.
        progress: show a tqdm counter on stderr.

    Returns:
        The split's ``pairs`` and ``empty`` counts.

    Raises:
        InputError: a missing file, invalid UTF-8 or an empty line (file:line), or unequal line counts
            (naming both files and their counts).
    """
    stats = SplitStats()
    counts = [0, 0]
    lines = zip_longest(iter_lines(src), iter_lines(tgt))
    for a, b in tqdm(lines, desc=f"check {src.name}", unit=" lines", disable=not progress, file=sys.stderr):
        if a is None or b is None:
            counts[a is None] = (a or b)[0]
            continue
        counts = [a[0], b[0]]
        if not a[1].strip() or not b[1].strip():
            if not skip_empty:
                path, number = (src, a[0]) if not a[1].strip() else (tgt, b[0])
                raise InputError(f"{path}:{number}: empty line (set empty_lines: skip to drop such pairs)")
            stats.empty += 1
    if counts[0] != counts[1]:
        raise InputError(f"{src} has {counts[0]} lines but {tgt} has {counts[1]}")
    stats.pairs = counts[0]
    return stats


def iter_pairs(src: Path, tgt: Path, skip_empty: bool) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line, source, target)`` of two checked files, leaving out pairs with an empty side if
    ``skip_empty``; ``line`` is the 1-based line number in the files."""
    for (line, a), (_, b) in zip(iter_lines(src), iter_lines(tgt)):
        if skip_empty and (not a.strip() or not b.strip()):
            continue
        yield line, a, b


def _remove_stale_outputs(out: Path, splits: dict[str, tuple[Path, Path]]) -> None:
    """Delete what an earlier ``prepare`` into ``out`` left that this run will not replace.

    ``data.yaml`` goes first, so an interrupted run leaves a directory without one. Per-token fields, alignments,
    SentencePiece models, the arrays of splits this run does not write and the temporary files of a killed run
    go too; input files are never deleted.
    """
    inputs = {p.resolve() for pair in splits.values() for p in pair}
    (out / META_NAME).unlink(missing_ok=True)
    for folder in (out / LATTICE_DIR, *out.glob(f".{LATTICE_DIR}.*tmp")):
        shutil.rmtree(folder, ignore_errors=True)
    stale = [p for split in SPLITS for p in out.glob(f"{split}.field.*") if p.suffix in (".bin", ".idx")]
    stale += [
        out / f"{split}.{side}.{ext}"
        for split in SPLITS if split not in splits for side in ("src", "tgt") for ext in ("bin", "idx", "txt")
    ]
    stale += [out / f"{split}.align" for split in SPLITS] + [out / name for name in SPM_FILES]
    stale += [p for name in (*SPLITS, META_NAME, *SPM_FILES) for p in out.glob(f".{name}.*tmp")]
    for path in stale:
        if path.is_file() and path.resolve() not in inputs:
            path.unlink()


def spm_sample_pairs(cfg: PrepareConfig) -> int:
    """How many training pairs SentencePiece learns from at most: ``spm_input_sentence_size`` sentences, two per
    pair for a joint model (both sides in one model), one per pair for a model per side (lattice corpora too).

    Args:
        cfg: supplies ``spm_input_sentence_size``, ``joint_vocab`` and ``lattice``.

    Returns:
        The number of pairs, or 0 (``spm_input_sentence_size: 0``) for every pair.
    """
    joint = cfg.joint_vocab and not cfg.lattice.enabled
    return cfg.spm_input_sentence_size // 2 if joint else cfg.spm_input_sentence_size


def sample_flags(total: int, size: int, seed: int) -> Iterator[bool]:
    """Whether each of ``total`` items, in order, belongs to a uniform random sample of ``size`` of them.

    Selection sampling (Knuth, TAOCP vol. 2, §3.4.2, Algorithm S): item ``t`` is taken with probability
    ``(size - taken) / (total - t)``, so every ``size``-subset is equally likely, exactly ``min(size, total)``
    items are taken, in one pass and constant memory. When ``total <= size`` every item is taken.

    Args:
        total: number of items.
        size: sample size.
        seed: seed of the draws.

    Yields:
        One flag per item.
    """
    rng = random.Random(seed)
    needed = size
    for seen in range(total):
        take = needed > 0 and rng.random() * (total - seen) < needed
        needed -= take
        yield take


def _copy_pairs(files: tuple[Path, Path], plain: tuple[Path, Path], skip_empty: bool, sample: Iterator[bool]) -> None:
    """Stream the (possibly gzipped) training pairs that ``sample`` flags (one flag per pair that
    :func:`iter_pairs` yields) into plain text files for SentencePiece."""
    with atomic_write(plain[0]) as src_out, atomic_write(plain[1]) as tgt_out:
        for (_, a, b), take in zip(iter_pairs(*files, skip_empty=skip_empty), sample):
            if take:
                src_out.write(a + "\n")
                tgt_out.write(b + "\n")


def _train_vocabs(cfg: PrepareConfig, plain: tuple[Path, Path], out: Path) -> tuple[Vocab, Vocab]:
    """Train the joint model ``spm.model``, or ``spm.src.model`` and ``spm.tgt.model``, and load them."""

    def train(files: list[Path], prefix: Path) -> Vocab:
        model = train_sentencepiece(
            files, prefix, cfg.vocab_size, cfg.model_type, cfg.character_coverage,
            cfg.spm_input_sentence_size, cfg.seed,
        )
        return Vocab.load(model)

    if cfg.joint_vocab:
        joint = train(list(plain), out / "spm")
        return joint, joint
    return train([plain[0]], out / "spm.src"), train([plain[1]], out / "spm.tgt")


def _train_target_vocab(cfg: PrepareConfig, plain_target: Path, out: Path) -> Vocab:
    """The target side's own SentencePiece model ``spm.tgt.model`` (a lattice corpus has no joint one)."""
    model = train_sentencepiece(
        [plain_target], out / "spm.tgt", cfg.vocab_size, cfg.model_type, cfg.character_coverage,
        cfg.spm_input_sentence_size, cfg.seed,
    )
    return Vocab.load(model)


def _train_lattice(
    cfg: PrepareConfig, plain: tuple[Path, Path], files: tuple[Path, Path], out: Path, total: int, progress: bool
) -> LatticeEncoder:
    """The lattice directory ``out/lattice`` for the training source (paper 002); ``total`` training pairs are
    segmented for its vocabulary, with a progress bar when ``progress``."""
    if cfg.joint_vocab:
        logger.info("lattice: the source has its own token vocabulary, the target its own SentencePiece model")
    pairs = iter_pairs(*files, skip_empty=cfg.empty_lines == "skip")
    bar = tqdm(pairs, total=total, desc="lattice vocabulary", unit=" pairs", disable=not progress, file=sys.stderr)
    sources = ((f"{files[0]}:{line}", a) for line, a, _ in bar)
    spm_options = {
        "model_type": cfg.model_type, "character_coverage": cfg.character_coverage,
        "input_sentence_size": cfg.spm_input_sentence_size, "seed": cfg.seed,
    }
    return train_lattice_encoder(cfg.lattice, plain[0], sources, out / LATTICE_DIR, spm_options)


def length_problem(src_len: int, tgt_len: int, cfg: PrepareConfig) -> str | None:
    """Which length filter a pair of piece counts fails.

    Args:
        src_len: source pieces (no EOS).
        tgt_len: target pieces (no BOS/EOS).
        cfg: supplies ``min_len``, ``max_len`` and ``max_len_ratio`` (0 turns the last two off).

    Returns:
        ``"too_short"``, ``"too_long"``, ``"bad_ratio"`` (checked in that order), or None when it passes.
    """
    if min(src_len, tgt_len) < cfg.min_len:
        return "too_short"
    if cfg.max_len > 0 and max(src_len, tgt_len) > cfg.max_len:
        return "too_long"
    if cfg.max_len_ratio > 0 and max(src_len, tgt_len) / max(min(src_len, tgt_len), 1) > cfg.max_len_ratio:
        return "bad_ratio"
    return None


def too_many_words(src: str, tgt: str, cfg: PrepareConfig) -> bool:
    """Whether a pair has a side of more than ``cfg.max_words`` words, counted on the text as given (split on
    whitespace, before any segmentation: the same pairs whatever the vocabulary); never with ``max_words`` 0."""
    return cfg.max_words > 0 and max(len(src.split()), len(tgt.split())) > cfg.max_words


def _encode_split(
    name: str,
    pairs: Iterator[tuple[int, str, str]],
    source: SourceEncoder,
    src_path: Path,
    tgt_vocab: Vocab,
    out: Path,
    cfg: PrepareConfig,
    stats: SplitStats,
    progress: bool,
) -> None:
    """Encode ``pairs`` in chunks and write ``{name}.{src,tgt}.{bin,idx,txt}`` (and a lattice corpus's
    ``{name}.field.lattice_{start,end}``) into ``out``.

    Training pairs over ``max_words`` words (:func:`too_many_words`) or that fail :func:`length_problem` are
    dropped; other splits keep every pair and only count the over-long ones. A source lattice over
    ``lattice.max_edges`` edges drops its pair in every split (:mod:`ordo.data.source`: a source is never cut).
    Counts go into ``stats``; ``src_path`` names the source file in messages.
    """
    total = stats.pairs - stats.empty
    max_edges = cfg.lattice.max_edges
    with ExitStack() as stack:
        src_ids = stack.enter_context(TokenArrayWriter(out / f"{name}.src", len(source.vocab)))
        tgt_ids = stack.enter_context(TokenArrayWriter(out / f"{name}.tgt", len(tgt_vocab)))
        field_rows = {
            field_name: stack.enter_context(TokenArrayWriter(out / f"{name}.field.{field_name}", max_edges + 1))
            for field_name in source.field_names
        }
        src_txt = stack.enter_context(atomic_write(out / f"{name}.src.txt"))
        tgt_txt = stack.enter_context(atomic_write(out / f"{name}.tgt.txt"))
        bar = stack.enter_context(
            tqdm(total=total, desc=f"encode {name}", unit=" pairs", disable=not progress, file=sys.stderr)
        )
        while chunk := list(islice(pairs, CHUNK_LINES)):
            sources = source.encode([a for _, a, _ in chunk], [f"{src_path}:{line}" for line, _, _ in chunk])
            targets = tgt_vocab.encode_batch([b for _, _, b in chunk])
            for (_, a, b), encoded, tgt in zip(chunk, sources, targets):
                if source.lattice is not None and len(encoded.ids) > max_edges:
                    stats.lattice_too_long += 1
                    continue
                if too_many_words(a, b, cfg):
                    stats.too_many_words += 1
                    if name == "train":
                        continue
                problem = length_problem(encoded.length, len(tgt), cfg)
                if name != "train" and problem == "too_long":
                    stats.too_long += 1
                elif name == "train" and problem is not None:
                    setattr(stats, problem, getattr(stats, problem) + 1)
                    continue
                src_ids.add(encoded.ids)
                tgt_ids.add(tgt)
                for field_name, writer in field_rows.items():
                    writer.add(encoded.fields[field_name])
                src_txt.write(a + "\n")
                tgt_txt.write(b + "\n")
                stats.kept += 1
            bar.update(len(chunk))


def _log_summary(cfg: PrepareConfig, meta: DataMeta, stats: dict[str, SplitStats]) -> None:
    """Log what was read, skipped, dropped and written."""
    for name, s in stats.items():
        line = f"{name}: {s.pairs} pairs read, {s.kept} kept"
        if s.empty:
            line += f", {s.empty} skipped for an empty line"
        if name == "train":
            longer = f"{s.too_long} longer than {cfg.max_len} pieces" if cfg.max_len else "none as too long (no max_len)"
            ratio = (f"{s.bad_ratio} with a length ratio over {cfg.max_len_ratio}" if cfg.max_len_ratio
                     else "none for its length ratio (no max_len_ratio)")
            line += f", dropped {longer}, {s.too_short} shorter than {cfg.min_len}, {ratio}"
            if cfg.max_words:
                line += f", {s.too_many_words} with a side over {cfg.max_words} words"
        logger.info(line)
        if name != "train" and s.too_long:
            logger.warning("%s: %d pairs longer than %d pieces (kept)", name, s.too_long, cfg.max_len)
        if name != "train" and s.too_many_words:
            logger.warning("%s: %d pairs with a side over %d words (kept)", name, s.too_many_words, cfg.max_words)
        if s.lattice_too_long:
            logger.warning("%s: %d pairs skipped: their source lattice has more than lattice.max_edges=%d edges",
                           name, s.lattice_too_long, cfg.lattice.max_edges)
    kind = "joint" if meta.joint_vocab else "separate"
    logger.info("vocabulary (%s, %s): %d source and %d target pieces", kind, cfg.vocab_from or cfg.model_type,
                meta.src_vocab_size, meta.tgt_vocab_size)
    spm_sizes = [meta.tgt_vocab_size] if meta.src_lattice else [meta.src_vocab_size, meta.tgt_vocab_size]
    if not cfg.vocab_from and min(spm_sizes) < cfg.vocab_size:
        logger.warning("the corpus is too small for vocab_size %d; SentencePiece learnt fewer pieces", cfg.vocab_size)
    logger.info("wrote %s", cfg.out)
