"""Fixtures of the unit tests."""

import os
import stat

import pytest
import torch


@pytest.fixture
def fsync_events(monkeypatch) -> list[str]:
    """The calls of ``os.fsync`` (on a file or a directory) and ``os.replace``, in order, each passed on."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    def replace(src, dst):
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of tiny tensors: on shared cores more threads only add synchronisation
    (about 100x slower there); the thread count is restored after the module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
