"""Reading text files (plain or gzip) with errors that name the file and line."""

from __future__ import annotations

import gzip
import itertools
import os
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO

import yaml

from ordo.errors import ConfigError, InputError

BOM = "\ufeff"  # a UTF-8 byte order mark, as some editors write at the start of a file


def open_binary(path: str | Path) -> BinaryIO:
    """Open ``path`` for reading bytes, transparently decompressing ``*.gz``.

    Any readable path works, pipes included (``<(zcat f.gz)``, ``/dev/stdin``).

    Raises:
        InputError: naming the file when it is missing, a directory or not readable.
    """
    path = Path(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 -- returned to the caller, who closes it
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a text file") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]
    return handle


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each line of ``path`` (1-based), without the line end.

    Raises:
        InputError: naming the file and line when a line is not valid UTF-8, or a ``.gz`` file is not gzip or
            ends early (truncated).
    """
    handle = open_binary(path)
    try:
        yield from iter_stream_lines(handle, str(path))
    finally:
        handle.close()
        if isinstance(handle, gzip.GzipFile) and handle.fileobj is not None:
            handle.fileobj.close()


def iter_stream_lines(stream: BinaryIO, name: str) -> Iterator[tuple[int, str]]:
    """As :func:`iter_lines` for an open binary stream (e.g. ``sys.stdin.buffer``) called ``name``.

    A UTF-8 byte order mark at the start of the stream is not part of the first line.
    """
    line_number = 0
    lines = iter(stream)
    while True:
        try:
            raw = next(lines)
        except StopIteration:
            return
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise InputError(f"{name}:{line_number + 1}: not a valid gzip file or truncated ({err})") from None
        line_number += 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{name}:{line_number}: invalid UTF-8 ({err.reason} at byte {err.start})") from None
        if line_number == 1:
            text = text.removeprefix(BOM)
        yield line_number, text.rstrip("\r\n")


def read_lines(path: str | Path) -> list[str]:
    """All lines of ``path`` as strings (small files: references, hypotheses)."""
    return [text for _, text in iter_lines(path)]


def iter_parallel_lines(path_a: str | Path, path_b: str | Path) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, text_a, text_b)`` for the lines of two files in step (as :func:`iter_lines`).

    Raises:
        InputError: when one file ends before the other, naming both and the line where it ended.
    """
    last = 0
    for line_a, line_b in itertools.zip_longest(iter_lines(path_a), iter_lines(path_b)):
        if line_a is None or line_b is None:
            shorter, longer = (path_a, path_b) if line_a is None else (path_b, path_a)
            raise InputError(f"{shorter} ends after line {last} but {longer} goes on: the files must be "
                             "line-parallel")
        last = line_a[0]
        yield last, line_a[1], line_b[1]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_directory(path: str | Path) -> None:
    """Flush the entries of directory ``path`` to disk, so that a rename into it survives a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary_beside(path: Path) -> tuple[int, str]:
    """A new temporary file in the folder of ``path`` (created if missing), to be renamed over ``path``: its
    descriptor and name.

    Raises:
        InputError: naming ``path`` when it is a directory or the folder cannot be made or written to.
    """
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a file to write")
    if path.parent.exists() and not path.parent.is_dir():
        raise InputError(f"{path}: cannot write ({path.parent} is a file, not a directory)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise InputError(f"{path}: cannot write ({err.strerror or err})") from None


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it over ``path`` only on success.

    An interrupted write leaves the previous ``path`` (if any) untouched, and no temporary file. The file
    is flushed to disk before the rename and the folder after it, so that after a power loss ``path`` holds
    either the old or the new content. The file gets the usual permissions (0666 minus the umask), not the
    private ones of a temporary file. A symbolic link (``/dev/stdout``, whichever file or pipe it names) or a
    path that is neither a file nor a folder (a named pipe) is written in place, not atomically: a rename would
    replace the link, or the file a shell's redirection still writes to.

    Raises:
        InputError: naming ``path``, before anything is written, when it is a directory or its folder cannot be
            made or written to.
    """
    path = Path(path)
    binary = "b" in mode
    if path.is_symlink() or (path.exists() and not (path.is_file() or path.is_dir())):
        with open(path, mode, encoding=None if binary else encoding, newline=None if binary else "\n") as handle:
            yield handle
        return
    fd, tmp_name = _temporary_beside(path)
    os.fchmod(fd, 0o666 & ~_umask())
    try:
        with open(fd, mode, encoding=None if binary else encoding, newline=None if binary else "\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
        fsync_directory(path.parent)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def copy_tree_atomically(source: str | Path, target: str | Path) -> None:
    """Copy folder ``source`` to ``target``, replacing any ``target``, so that ``target`` is never half-copied.

    The copy is made in a temporary folder beside ``target``, flushed to disk and renamed into place; the old
    ``target`` is moved aside first and removed last. An interrupted copy leaves the old ``target`` (if any)
    untouched (and, unless killed outright, no temporary folder); a kill between the two renames leaves no ``target``, which later reads
    report as missing, never as whole. Files and folders keep the permissions of ``source`` (as
    ``shutil.copytree``).

    Raises:
        InputError: naming ``target`` when its folder cannot be made or written to.
    """
    source, target = Path(source), Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as err:
        raise InputError(f"{target}: cannot write ({err.strerror or err})") from None
    aside = staging.with_name(staging.name.removesuffix(".tmp") + ".old.tmp")
    try:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        for path in sorted(staging.rglob("*")):
            if path.is_file():
                with open(path, "rb") as handle:
                    os.fsync(handle.fileno())
        if target.exists():
            os.replace(target, aside)
        os.replace(staging, target)
        fsync_directory(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)


class YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a number in exponent form without a dot (``1e-3``) is a float, as in
    YAML 1.2 and as users write learning rates; PyYAML's YAML 1.1 reads it as a string."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def parse_yaml(text: str) -> Any:
    """Parse YAML text with :class:`YamlLoader`."""
    return yaml.load(text, Loader=YamlLoader)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML file into a dict, with errors naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data
