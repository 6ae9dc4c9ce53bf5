"""Fixtures of the unit tests."""

import os
import stat

import pytest


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
