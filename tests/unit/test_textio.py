"""Text reading and atomic writes."""

import io
import os

import pytest

from ordo.data.textio import atomic_write, iter_stream_lines, read_lines
from ordo.errors import InputError


def test_stream_lines_name_the_stream_and_line_on_bad_utf8():
    stream = io.BytesIO(b"ok\r\nfine\n" + b"\xc3\x28\n")
    lines = iter_stream_lines(stream, "<stdin>")
    assert [next(lines), next(lines)] == [(1, "ok"), (2, "fine")]
    with pytest.raises(InputError, match="<stdin>:3: invalid UTF-8"):
        next(lines)


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write("half")
        raise RuntimeError("interrupted")
    assert read_lines(target) == ["old"]
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_uses_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "f.txt") as handle:
            handle.write("x\n")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644
