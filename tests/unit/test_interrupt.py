"""SIGINT and SIGTERM during training are recorded, not fatal, and a second one cannot cut the save short."""

import os
import signal

from ordo.training.interrupt import StopSignals


def test_signals_are_recorded_once_and_the_handlers_restored():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as signals:
        assert signals.received == 0
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # a second signal while saving: logged, the process goes on
        assert signals.received == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
