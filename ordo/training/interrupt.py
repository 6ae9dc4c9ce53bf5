"""SIGINT (Ctrl-C) and SIGTERM during training: recorded, so that the loop can finish its update, save a
checkpoint and stop, instead of the process dying with the updates since the last checkpoint."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("ordo.train")

HANDLED = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """While its ``with`` block runs (in the main thread), SIGINT and SIGTERM set :attr:`received` instead of
    ending the process; a second signal only logs, so it cannot interrupt the checkpoint being written.

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self) -> None:
        self.received = 0  # number of the first signal received (0: none)
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._record) for sig in HANDLED}
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        self._previous = {}

    def _record(self, signum: int, frame: FrameType | None) -> None:
        """The handler: remember the first signal; log each."""
        name = signal.Signals(signum).name
        if self.received:
            logger.warning("%s: already stopping, a checkpoint is being written (kill -9 would lose the "
                           "updates since the last periodic checkpoint)", name)
            return
        self.received = signum
        logger.warning("%s: stopping after the current update and saving a checkpoint", name)
