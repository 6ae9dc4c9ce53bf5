"""One training at a time in a run directory: ``ordo train`` holds an exclusive ``flock`` on ``RUN/train.lock``
while it trains, so that a second ``ordo train --out RUN`` (or a resume of RUN) stops at once instead of
overwriting the first one's checkpoints.

Readers that do not write the run (``ordo average``) ask :func:`training_holder` whether a training holds it.

The kernel releases a ``flock`` when the process that holds it ends, however it ends (``kill -9``, a crash), so a
lock file left by a dead process is taken over by the next start; the file itself stays, naming its last holder.
On Linux, ``flock`` on NFS is emulated with byte-range locks, which the NFS server arbitrates between machines;
a filesystem that does not support it (Lustre mounted without ``-o flock``) gets a warning and no lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from ordo.errors import InputError, OrdoError

logger = logging.getLogger("ordo.train")

LOCK_NAME = "train.lock"
BUSY = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)  # another open file holds the lock (EACCES: some NFS)


class RunLocked(OrdoError):
    """Another process is training in the same run directory."""


def holder_line() -> str:
    """What the lock file says of this process: ``pid N on host H since YYYY-MM-DD HH:MM:SS``."""
    return f"pid {os.getpid()} on host {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``run_dir`` (creating the folder and ``train.lock``) while the block runs.

    Args:
        run_dir: the run directory.

    Raises:
        RunLocked: at once, naming ``run_dir`` and the process holding the lock (its pid and host), when another
            process holds it; nothing in ``run_dir`` is changed.
        InputError: when ``run_dir`` or its lock file cannot be made (a file in the path, no permission, a full
            disk), naming the path and the system's reason.
    """
    path = run_dir / LOCK_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not truncated: it names the holder, if there is one
    except OSError as err:
        raise InputError(f"{err.filename or path}: cannot be created ({err.strerror})") from None
    try:
        if _acquire(fd, path):
            os.ftruncate(fd, 0)
            os.write(fd, f"{holder_line()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def training_holder(run_dir: Path) -> str | None:
    """What the lock file of ``run_dir`` names when a training holds its lock now (``pid N on host H since ...``),
    else None: no lock file, a free lock, or a filesystem that cannot lock. The lock is tried shared and let go at
    once, so a training starting meanwhile is not stopped."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        return _holder(fd) if err.errno in BUSY else None
    finally:
        os.close(fd)  # releases a shared lock taken
    return None


def _acquire(fd: int, path: Path) -> bool:
    """Take the lock on the open ``path`` without waiting; whether it was taken (False: the filesystem cannot lock,
    which is logged).

    Raises:
        RunLocked: when another process holds it.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in BUSY:
            logger.warning("%s: cannot lock the run directory (%s); make sure no other training uses it", path,
                           err.strerror or err)
            return False
        raise RunLocked(f"{path.parent}: another training is running in this run directory ({_holder(fd)}, in "
                        f"{path}); wait for it to end or stop it, or train into another --out") from None
    return True


def _holder(fd: int) -> str:
    """What the open lock file ``fd`` says of the process that holds it (:func:`holder_line`)."""
    return os.pread(fd, 4096, 0).decode(errors="replace").strip() or "its pid not yet written"
