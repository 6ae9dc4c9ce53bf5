"""OpenMP's wait policy for a verb, chosen before PyTorch loads OpenMP (``bench/RESULTS.md``, "Sharing the CPU").

OpenMP's threads spin while they wait for each other. On cores that other work keeps busy, a spinning thread
takes the time a working one needs: on 2 cores beside another training run, beam search ran 15 sentences/s
spinning and 116-119 waiting passively (``OMP_WAIT_POLICY=PASSIVE``), and beside two busy one-thread processes
training ran 1.8-5x as fast passively; on quiet cores passive waiting costs 4-15% (34% for the demo's tiny model).
So a computing verb (:data:`COMPUTING_VERBS`) waits passively when other threads stay runnable through a short
look at the machine's run queue (:func:`other_runnable`: a passing process shows in few of its readings; quiet
cores cost one reading), and spins otherwise; ``ordo serve`` always waits passively, as its cores are shared
with its own HTTP threads. A setting the user made (:data:`USER_SETTINGS`) wins, and so does a ``torchrun``
worker's default: its ranks start together and would count each other.

This only works before PyTorch is imported (OpenMP reads its settings once, as it loads): the ``ordo`` command
runs it first; a notebook sets ``OMP_WAIT_POLICY`` itself."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path

LOADAVG = Path("/proc/loadavg")  # its fourth field: runnable threads / all threads
SAMPLES = 10  # readings of the run queue ...
SAMPLE_GAP_S = 0.01  # ... this far apart: 0.1 s in all where other work runs through them, one reading where not
USER_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # OpenMP's (and GNU OpenMP's) own say on waiting
COMPUTING_VERBS = frozenset({"train", "translate", "demo"})  # the verbs whose time is OpenMP's products
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}


def runnable_threads(loadavg_text: str) -> int:
    """The machine's runnable threads, the reader's own included, in the text of /proc/loadavg (its fourth field,
    ``RUNNABLE/ALL``)."""
    return int(loadavg_text.split()[3].split("/")[0])


def read_loadavg() -> str:
    """The text of /proc/loadavg."""
    return LOADAVG.read_text(encoding="ascii")


def other_runnable(read: Callable[[], str] = read_loadavg, samples: int = SAMPLES,
                   gap_s: float = SAMPLE_GAP_S) -> int | None:
    """The fewest runnable threads besides this one over ``samples`` readings of the run queue ``gap_s`` apart
    (work that runs through all of them, not a process passing by), or 0 at the first reading with none, so
    that quiet cores cost one reading; None where the machine has no /proc/loadavg (not Linux)."""
    fewest = None
    for index in range(samples):
        if index:
            time.sleep(gap_s)
        try:
            others = runnable_threads(read()) - 1
        except OSError:
            return None
        fewest = others if fewest is None else min(fewest, others)
        if fewest <= 0:
            return 0
    return fewest


def user_chose(environ: MutableMapping[str, str]) -> bool:
    """Whether the user (or ``torchrun``, for a worker of several) has a say that this module must leave alone."""
    return any(name in environ for name in USER_SETTINGS) or environ.get("LOCAL_WORLD_SIZE", "1") != "1"


def set_wait_policy(verb: str, environ: MutableMapping[str, str] = os.environ,
                    count_others: Callable[[], int | None] | None = None) -> str | None:
    """Make OpenMP's threads wait passively for ``verb`` where the module docstring says so, in ``environ``
    (other threads counted by ``count_others``, :func:`other_runnable` by default); a line for the user where
    other work decided it, else None."""
    if user_chose(environ):
        return None
    if verb == "serve":
        environ.update(PASSIVE)
        return None
    if verb not in COMPUTING_VERBS:
        return None
    others = (count_others or other_runnable)()
    if not others:
        return None
    environ.update(PASSIVE)
    return (f"ordo {verb}: {others} other thread(s) kept running on this machine's cores: OpenMP's threads "
            "wait passively (OMP_WAIT_POLICY=PASSIVE; set OMP_WAIT_POLICY yourself to choose)")
