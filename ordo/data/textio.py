"""Reading text files (plain or gzip) with errors that name the file and line."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO

import yaml

from ordo.errors import ConfigError, InputError


def open_binary(path: str | Path) -> BinaryIO:
    """Open ``path`` for reading bytes, transparently decompressing ``*.gz``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each line of ``path`` (1-based), without the line end.

    Raises:
        InputError: naming the file and line when a line is not valid UTF-8.
    """
    with open_binary(path) as handle:
        yield from iter_stream_lines(handle, str(path))


def iter_stream_lines(stream: BinaryIO, name: str) -> Iterator[tuple[int, str]]:
    """As :func:`iter_lines` for an open binary stream (e.g. ``sys.stdin.buffer``) called ``name``."""
    for line_number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{name}:{line_number}: invalid UTF-8 ({err.reason} at byte {err.start})") from None
        yield line_number, text.rstrip("\r\n")


def read_lines(path: str | Path) -> list[str]:
    """All lines of ``path`` as strings (small files: references, hypotheses)."""
    return [text for _, text in iter_lines(path)]


def read_parallel_lines(path_a: str | Path, path_b: str | Path) -> tuple[list[str], list[str]]:
    """Both files' lines, checking that they have the same number of lines."""
    lines_a, lines_b = read_lines(path_a), read_lines(path_b)
    if len(lines_a) != len(lines_b):
        raise InputError(f"{path_a} has {len(lines_a)} lines but {path_b} has {len(lines_b)}")
    return lines_a, lines_b


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it over ``path`` only on success.

    An interrupted write leaves the previous ``path`` (if any) untouched. The file gets the usual
    permissions (0666 minus the umask), not the private ones of a temporary file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())
    binary = "b" in mode
    try:
        with open(fd, mode, encoding=None if binary else encoding, newline=None if binary else "\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML file into a dict, with errors naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data
