"""The NIST Zh->En corpus of recipes/nist_zhen/run.sh: check the user's copy, segment its Chinese, write the splits;
and the table of the test sets' scores.

``split`` reads the layout of docs/recipes.md from ``--data-dir``: ``train.zh`` and ``train.en`` (the LDC
training text, aligned line by line) and for each NIST set NAME of ``--sets`` (``sets.yaml``) ``NAME.zh`` and
its references ``NAME.en0`` .. ``NAME.en3``, plain UTF-8, a sentence per line. Every file's presence and line
count is checked before anything is written: the training sides have the same count, each set's source the
count of ``--sets``, each reference its source's; the errors name the file. It then writes into ``--out``
(gzipped, each atomically; files already there are kept) ``train``, ``valid`` (the dev set and its first
reference) and for each test set ``NAME.zh.gz``, ``NAME.en.gz`` (its first reference, the test split of
``ordo prepare``) and ``NAME.en0.gz`` ...; the Chinese segmented into words by ``--segmenter`` (jieba, as the
project's Zh recipes; ``chars``; ``thulac``) and joined by spaces, the English as given. Beside each Chinese
file goes its unsegmented text, stripped, as ``train.raw.zh.gz``, ``valid.raw.zh.gz`` and ``NAME.raw.zh.gz``:
the input of paper 002's lattices, which segment the text themselves (recipes/nist_verdict's lattice systems).
``tests.txt`` lists the test sets for run.sh.

``score`` scores run.sh's translations of each test set (``WORK/NAME.{best,averaged}.hyp``) against all its
references, as ``ordo evaluate --ref NAME.en0.gz --ref NAME.en1.gz ... --lowercase`` does, into
``WORK/scores.tsv``, and prints the table in markdown.

usage: python recipes/nist_zhen/corpus.py split --data-dir NIST --out WORK/corpus [--sets sets.yaml]
           [--dev nist02] [--tests "nist03 nist04"] [--segmenter jieba]
       python recipes/nist_zhen/corpus.py score --work WORK --corpus WORK/corpus --tests "nist03 nist04"
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ordo.data.textio import atomic_write, iter_lines, read_yaml
from ordo.errors import OrdoError

if TYPE_CHECKING:
    from ordo.data.lattice.segmenters import Segmenter

HERE = Path(__file__).resolve().parent
LAYOUT = ("train.zh and train.en (aligned line by line), and for each NIST set NAME.zh with its references "
          "NAME.en0 .. NAME.en3, plain text, a sentence per line (docs/recipes.md)")
CHECKPOINTS = ("best", "averaged")
RAW = "raw.zh"  # the unsegmented Chinese beside the words: SPLIT.raw.zh.gz


class LayoutError(OrdoError):
    """A copy of the corpus that is not in the recipe's layout: names the file."""


def count_lines(path: Path) -> int:
    """The number of lines of ``path``.

    Raises:
        LayoutError: naming the file when it is missing.
    """
    if not path.is_file():
        raise LayoutError(f"{path}: missing (the layout: {LAYOUT})")
    return sum(1 for _ in iter_lines(path))


def counted(path: Path, problems: list[str], expected: int | None = None, against: str = "") -> int | None:
    """The line count of ``path``, None when it is missing; appends to ``problems`` the missing file, or a count
    other than ``expected`` (``against`` says whose count that is, and why it must match)."""
    try:
        lines = count_lines(path)
    except LayoutError as err:
        problems.append(str(err))
        return None
    if expected is not None and lines != expected:
        problems.append(f"{path}: {lines} lines, {against}")
    return lines


def check_layout(data_dir: Path, counts: dict[str, int], references: int, names: list[str]) -> list[str]:
    """Every problem of the copy in ``data_dir`` with the NIST sets ``names``, each naming its file (none: the
    copy is in the layout, with the counts of ``counts`` and ``references`` references per set)."""
    problems: list[str] = []
    sides = {side: counted(data_dir / f"train.{side}", problems) for side in ("zh", "en")}
    if None not in sides.values() and sides["zh"] != sides["en"]:
        problems.append(f"{data_dir / 'train.en'}: {sides['en']} lines, {data_dir / 'train.zh'} has {sides['zh']} "
                        "(the training text must be aligned line by line)")
    if sides.get("zh") == 0:
        problems.append(f"{data_dir / 'train.zh'}: empty")
    for name in names:
        if name not in counts:
            problems.append(f"{name}: not a NIST set of the sets file ({', '.join(counts)})")
            continue
        source = data_dir / f"{name}.zh"
        lines = counted(source, problems, counts[name],
                        f"{name} has {counts[name]} (another version of the set? give its count with --sets FILE)")
        if lines is None:
            continue
        for number in range(references):
            counted(data_dir / f"{name}.en{number}", problems, lines,
                    f"{source} has {lines} (a reference has a line per source sentence)")
    return problems


def write_gz(dest: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``dest`` gzipped (atomically, no timestamp: the same bytes on every run).

    Returns:
        the number of lines written.
    """
    count = 0
    with atomic_write(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for line in lines:
            out.write(f"{line}\n".encode())
            count += 1
    return count


def text(path: Path) -> Iterator[str]:
    """The lines of ``path``, stripped."""
    return (line.strip() for _, line in iter_lines(path))


def write_splits(data_dir: Path, out: Path, dev: str, tests: list[str], references: int, words: Segmenter) -> None:
    """Write the splits of the checked copy in ``data_dir`` into ``out``, those already there kept: each Chinese
    file as ``words``' words joined by spaces (``SPLIT.zh.gz``) and as given (``SPLIT.raw.zh.gz``), the English
    as given (see the module's docstring)."""
    chinese = {"train": data_dir / "train.zh", "valid": data_dir / f"{dev}.zh"}
    given = {"train.en.gz": data_dir / "train.en", "valid.en.gz": data_dir / f"{dev}.en0"}
    for name in tests:
        chinese[name] = data_dir / f"{name}.zh"
        given |= {f"{name}.en.gz": data_dir / f"{name}.en0"}
        given |= {f"{name}.en{number}.gz": data_dir / f"{name}.en{number}" for number in range(references)}
    given |= {f"{name}.{RAW}.gz": path for name, path in chinese.items()}
    written = {f"{name}.zh.gz": (" ".join(words.segment_one(line)) for line in text(path))
               for name, path in chinese.items()}
    written |= {name: text(path) for name, path in given.items()}
    for name, lines in written.items():
        if not (out / name).exists():
            print(f"nist_zhen: {out / name}: {write_gz(out / name, lines)} lines", file=sys.stderr)


def split(data_dir: Path, out: Path, sets: Path, dev: str, tests: list[str], segmenter: str) -> list[str]:
    """Check the copy in ``data_dir`` and write the recipe's splits into ``out`` (see the module's docstring).

    Returns:
        the test sets: ``tests``, or every set of ``sets`` but ``dev`` when ``tests`` is empty.

    Raises:
        LayoutError: listing every problem of the copy, each naming its file, before anything is written; or a
            corpus folder written with another dev set or segmenter.
    """
    from ordo.data.lattice.segmenters import WORD_SEGMENTERS, load_segmenter  # here: it loads PyTorch

    if segmenter not in WORD_SEGMENTERS:
        raise LayoutError(f"--segmenter {segmenter}: not one of {', '.join(WORD_SEGMENTERS)}")
    spec = read_yaml(sets)
    if not isinstance(spec.get("sets"), dict) or not isinstance(spec.get("references"), int):
        raise LayoutError(f"{sets}: needs 'references: N' and 'sets: {{NAME: LINES, ...}}' (as "
                          "recipes/nist_zhen/sets.yaml)")
    counts, references = {str(k): int(v) for k, v in spec["sets"].items()}, int(spec["references"])
    tests = tests or [name for name in counts if name != dev]
    if dev in tests:
        raise LayoutError(f"{dev} is the dev set and cannot be a test set too")
    problems = check_layout(data_dir, counts, references, [dev, *tests])
    if problems:
        raise LayoutError("\n".join(problems))
    made = out / "corpus.txt"
    recorded = f"dev {dev}, segmenter {segmenter}\n"
    if made.exists() and made.read_text(encoding="utf-8") != recorded:
        raise LayoutError(f"{out} was written with {made.read_text(encoding='utf-8').strip()}: give another --work "
                          f"for {recorded.strip()}")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(made) as handle:
        handle.write(recorded)
    write_splits(data_dir, out, dev, tests, references, load_segmenter(segmenter, out))
    with atomic_write(out / "tests.txt") as handle:
        handle.write(" ".join(tests) + "\n")
    return tests


def references_of(corpus: Path, name: str) -> list[Path]:
    """The reference files ``split`` wrote for test set ``name``: ``NAME.en0.gz``, ``NAME.en1.gz`` ...

    Raises:
        LayoutError: naming the set when it has none (the corpus folder is not ``split``'s).
    """
    refs = sorted(corpus.glob(f"{name}.en[0-9].gz"))
    if not refs:
        raise LayoutError(f"{corpus}: no {name}.en0.gz (written by corpus.py split)")
    return refs


def score(work: Path, corpus: Path, tests: list[str]) -> str:
    """Score ``work/NAME.CHECKPOINT.hyp`` of each test set and checkpoint against all the set's references in
    ``corpus`` (:func:`ordo.evaluation.bleu.score_files`, as ``ordo evaluate --ref ... --ref ...``): sacreBLEU
    case-insensitive (the papers' figure) and cased, and multi-bleu.perl's case-insensitive BLEU on the tokens;
    write them to ``work/scores.tsv`` with the mean over the test sets (as the papers' "Average" columns).

    Returns:
        the table in markdown, with the case-insensitive BLEU's signature.

    Raises:
        InputError: naming an output or reference file that is missing or has another line count.
    """
    from ordo.evaluation.bleu import score_files

    rows, signature = [], ""
    for name in tests:
        refs = references_of(corpus, name)
        for checkpoint in CHECKPOINTS:
            hyp = work / f"{name}.{checkpoint}.hyp"
            lc = score_files(hyp, refs, tokenized_bleu=True, lowercase=True)
            cased = score_files(hyp, refs)
            signature = str(lc["bleu_signature"])
            rows.append([name, checkpoint, float(lc["bleu"]), float(cased["bleu"]), float(lc["tok_bleu"])])
    for checkpoint in CHECKPOINTS:
        columns = list(zip(*(row[2:] for row in rows if row[1] == checkpoint)))
        rows.append(["mean", checkpoint, *(sum(column) / len(column) for column in columns)])
    header = ["test", "checkpoint", "bleu", "bleu_cased", "tok_bleu"]
    with atomic_write(work / "scores.tsv") as out:
        out.write("\t".join(header) + "\n")
        out.writelines("\t".join([*map(str, row[:2]), *(f"{value:.2f}" for value in row[2:])]) + "\n" for row in rows)
    lines = ["| test | checkpoint | BLEU (case-insensitive) | BLEU (cased) | tokenized BLEU (case-insensitive) |",
             "|---|---|---|---|---|"]
    lines += [f"| {row[0]} | {row[1]} | " + " | ".join(f"{value:.2f}" for value in row[2:]) + " |" for row in rows]
    return "\n".join([*lines, "", f"BLEU: sacreBLEU against the {len(refs)} references, {signature}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    s = verbs.add_parser("split", help="check the copy, segment the Chinese, write the splits")
    s.add_argument("--data-dir", type=Path, required=True, help="the user's copy, in the layout")
    s.add_argument("--out", type=Path, required=True, help="the corpus folder (WORK/corpus)")
    s.add_argument("--sets", type=Path, default=HERE / "sets.yaml", help="the NIST sets and their line counts")
    s.add_argument("--dev", default="nist02")
    s.add_argument("--tests", default="", help="space-separated test sets (default: every other set)")
    s.add_argument("--segmenter", default="jieba", help="jieba, chars or thulac")
    t = verbs.add_parser("score", help="the test sets' scores against all their references: WORK/scores.tsv, "
                                       "printed as markdown")
    t.add_argument("--work", type=Path, required=True, help="the outputs, WORK/NAME.{best,averaged}.hyp")
    t.add_argument("--corpus", type=Path, required=True, help="the corpus folder split wrote (the references)")
    t.add_argument("--tests", required=True, help="space-separated test sets")
    args = parser.parse_args()
    try:
        if args.verb == "split":
            split(args.data_dir, args.out, args.sets, args.dev, args.tests.split(), args.segmenter)
        else:
            print(score(args.work, args.corpus, args.tests.split()))
    except OrdoError as err:
        sys.exit("\n".join(f"nist_zhen: error: {line}" for line in str(err).splitlines()))


if __name__ == "__main__":
    main()
