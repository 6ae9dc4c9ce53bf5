"""The transcript pairs of the IWSLT17 release's training talks (``train.tags.zh-en.zh`` and ``.en``).

The two files are line-parallel: transcript lines, and per talk the metadata lines (``<url>``, ``<talkid>``,
``<title>``, ``<description>``, ...) at the same line numbers on both sides. A pair is kept when neither side
is a metadata line, dropped when both are, and a file whose sides disagree (one side metadata, the other
not) or that is not UTF-8 is an error naming the file and line, since every pair after it would be shifted.

usage: python recipes/iwslt17_talks.py TALKS_DIR OUT_ZH OUT_EN      (writes plain text, one pair per line)
"""

from __future__ import annotations

import sys
from pathlib import Path

from ordo.data.textio import iter_parallel_lines
from ordo.errors import InputError


def is_metadata(line: str) -> bool:
    """A talk's metadata line: it starts (after spaces) with a tag such as ``<url>``."""
    return line.lstrip().startswith("<")


def transcript_pairs(zh_path: Path, en_path: Path) -> list[tuple[str, str]]:
    """The (zh, en) transcript pairs of two line-parallel train.tags files, stripped of surrounding spaces."""
    pairs = []
    for number, zh, en in iter_parallel_lines(zh_path, en_path):
        if is_metadata(zh) != is_metadata(en):
            raise InputError(f"{zh_path}:{number} and {en_path}:{number}: one is a metadata line, the other not")
        if not is_metadata(zh):
            pairs.append((zh.strip(), en.strip()))
    if not pairs:
        raise InputError(f"{zh_path}: no transcript lines (is this the IWSLT17 2017-01-trnted release?)")
    return pairs


def main() -> None:
    talks, out_zh, out_en = (Path(arg) for arg in sys.argv[1:4])
    try:
        pairs = transcript_pairs(talks / "train.tags.zh-en.zh", talks / "train.tags.zh-en.en")
    except (InputError, OSError) as err:
        sys.exit(f"error: {err}")
    out_zh.write_text("".join(f"{zh}\n" for zh, _ in pairs), encoding="utf-8")
    out_en.write_text("".join(f"{en}\n" for _, en in pairs), encoding="utf-8")


if __name__ == "__main__":
    main()
