"""Text reading and atomic writes."""

import gzip
import io
import os
import shutil
import threading

import pytest

from ordo.data.textio import atomic_write, copy_tree_atomically, iter_stream_lines, parse_yaml, read_lines
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


def _feed_fifo(path, data: bytes) -> threading.Thread:
    """Write ``data`` into the named pipe ``path`` from a thread (opening a FIFO blocks until both ends are open)."""
    def write() -> None:
        with open(path, "wb") as handle:
            handle.write(data)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_a_pipe_is_read_like_a_file(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = _feed_fifo(fifo, b"ein Hund\nzwei\n")
    assert read_lines(fifo) == ["ein Hund", "zwei"]
    writer.join()


def test_atomic_write_writes_in_place_through_a_link_or_into_a_pipe(tmp_path):
    """`--output /dev/stdout` (a link to the process's descriptor 1) must write to the file or pipe descriptor 1
    holds, not rename a new file over the link or over the file a shell redirected to."""
    redirected = tmp_path / "redirected.txt"
    with open(redirected, "w") as descriptor_holder:
        (tmp_path / "stdout").symlink_to(f"/proc/self/fd/{descriptor_holder.fileno()}")
        with atomic_write(tmp_path / "stdout") as handle:
            handle.write("new\n")
        assert os.fstat(descriptor_holder.fileno()).st_ino == redirected.stat().st_ino
    assert redirected.read_text() == "new\n" and (tmp_path / "stdout").is_symlink()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with atomic_write(fifo) as handle:
        handle.write("durch die Leitung\n")
    reader.join(timeout=10)
    assert received == [b"durch die Leitung\n"] and fifo.is_fifo()
    assert sorted(os.listdir(tmp_path)) == ["pipe", "redirected.txt", "stdout"]


def test_atomic_write_over_a_directory_or_under_a_file_is_an_error_naming_the_path(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(InputError, match="taken: is a directory, not a file to write"), \
            atomic_write(tmp_path / "taken"):
        pass
    (tmp_path / "plain").write_text("x\n")
    with pytest.raises(InputError, match=r"plain/out.txt: cannot write \(.*plain is a file, not a directory\)"), \
            atomic_write(tmp_path / "plain" / "out.txt"):
        pass
    with pytest.raises(InputError, match=r"plain/sub/out.txt: cannot write \(Not a directory\)"), \
            atomic_write(tmp_path / "plain" / "sub" / "out.txt"):
        pass
    assert sorted(os.listdir(tmp_path)) == ["plain", "taken"] and os.listdir(tmp_path / "taken") == []


def test_missing_file_and_directory_are_named(tmp_path):
    with pytest.raises(InputError, match="nothing.txt: no such file"):
        read_lines(tmp_path / "nothing.txt")
    with pytest.raises(InputError, match="is a directory"):
        read_lines(tmp_path)


@pytest.mark.parametrize("make, message", [
    (lambda data: data[:-12], "truncated"),  # the gzip trailer and part of the stream cut off
    (lambda data: b"plain text, not gzip\n", "not a valid gzip file"),
])
def test_a_broken_gz_is_an_input_error_naming_the_file(tmp_path, make, message):
    path = tmp_path / "ref.txt.gz"
    path.write_bytes(make(gzip.compress(("a line of text\n" * 400).encode())))
    with pytest.raises(InputError, match=rf"ref\.txt\.gz:\d+: .*{message}"):
        read_lines(path)


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    path = tmp_path / "ref.txt"
    path.write_bytes(b"\xef\xbb\xbfFirst line\n\xef\xbb\xbfsecond keeps it\n")
    assert read_lines(path) == ["First line", "\ufeffsecond keeps it"]


@pytest.mark.parametrize("text, value", [("1e-3", 1e-3), ("5E-4", 5e-4), ("2.5e3", 2500.0), ("-1e+2", -100.0),
                                         ("1000", 1000), ("1.5", 1.5), ("e5", "e5"), ("1e", "1e")])
def test_yaml_numbers_as_users_write_them(text, value):
    parsed = parse_yaml(f"lr: {text}\n")["lr"]
    assert parsed == value and type(parsed) is type(value)


def test_atomic_write_flushes_the_file_before_the_rename_and_the_folder_after(tmp_path, fsync_events):
    with atomic_write(tmp_path / "f.txt") as handle:
        handle.write("x\n")
    assert fsync_events == ["fsync file", "replace", "fsync dir"]


def test_copy_tree_atomically_replaces_the_target_whole_or_not_at_all(tmp_path, monkeypatch):
    """For a run's copy of a lattice folder: a copy killed part-way must not leave a folder that loads as if whole
    (shutil.copytree over the old folder left a truncated file in it)."""
    source, target = tmp_path / "source", tmp_path / "run" / "lattice"
    source.mkdir()
    for name, text in (("a.txt", "new a\n"), ("b.txt", "new b\n")):
        (source / name).write_text(text)
    target.mkdir(parents=True)
    (target / "a.txt").write_text("old a\n")
    (target / "stale.txt").write_text("old\n")
    real_copy = shutil.copyfile

    def killed(src, dst, **kwargs):
        if os.fspath(src).endswith("b.txt"):
            raise KeyboardInterrupt
        return real_copy(src, dst, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", killed)
    with pytest.raises(KeyboardInterrupt):
        copy_tree_atomically(source, target)
    assert sorted(os.listdir(target)) == ["a.txt", "stale.txt"] and read_lines(target / "a.txt") == ["old a"]
    assert os.listdir(target.parent) == ["lattice"]
    monkeypatch.setattr(shutil, "copyfile", real_copy)
    copy_tree_atomically(source, target)
    assert sorted(os.listdir(target)) == ["a.txt", "b.txt"] and read_lines(target / "b.txt") == ["new b"]
    assert os.listdir(target.parent) == ["lattice"]
    copy_tree_atomically(source, tmp_path / "fresh")
    assert sorted(os.listdir(tmp_path / "fresh")) == ["a.txt", "b.txt"]
