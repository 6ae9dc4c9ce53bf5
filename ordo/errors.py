"""Errors that ordo reports to the user as a one-line message (the CLI exits with status 2), and the
interruption of training by a signal (status 128 + the signal's number)."""

import importlib
from types import ModuleType


class OrdoError(Exception):
    """Base class of every error meant for the user rather than a traceback."""


class InputError(OrdoError):
    """Bad input data: names the file and, where it applies, the line."""


class ConfigError(OrdoError):
    """An invalid configuration: names the file or flag and the key."""


class CheckpointError(OrdoError):
    """A missing, truncated or incompatible checkpoint, or one that cannot be saved."""


class MissingExtraError(OrdoError):
    """An optional dependency is not installed: names the extra of ``ordo`` that installs it."""


def import_extra(module: str, extra: str) -> ModuleType:
    """Import ``module``, which only the optional dependencies ``ordo[extra]`` install.

    Raises:
        MissingExtraError: ``"MODULE is not installed; pip install 'ordo[EXTRA]'"`` when it cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"{module} is not installed; pip install 'ordo[{extra}]'") from None


class TrainingInterrupted(Exception):
    """Training stopped on SIGINT or SIGTERM after saving a checkpoint; the CLI exits with status
    128 + ``signal_number`` (130 for Ctrl-C, 143 for SIGTERM), as a process killed by that signal would."""

    def __init__(self, signal_number: int, message: str) -> None:
        super().__init__(message)
        self.signal_number = signal_number
