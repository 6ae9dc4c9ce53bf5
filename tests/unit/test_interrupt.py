"""SIGINT and SIGTERM during training are recorded, not fatal, and a second one cannot cut the save short."""

import os
import signal

from ordo.training.interrupt import StopSignals


def test_signals_are_recorded_once_and_the_handlers_restored():
    # the handlers this process started with (SIGINT's is SIG_IGN in a background job, not Python's own)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with StopSignals() as signals:
        assert signals.received == 0
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # a second signal while saving: logged, the process goes on
        assert signals.received == signal.SIGTERM
    assert {sig: signal.getsignal(sig) for sig in before} == before
