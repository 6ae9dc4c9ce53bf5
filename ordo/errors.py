"""Errors that ordo reports to the user as a one-line message (the CLI exits with status 2)."""


class OrdoError(Exception):
    """Base class of every error meant for the user rather than a traceback."""


class InputError(OrdoError):
    """Bad input data: names the file and, where it applies, the line."""


class ConfigError(OrdoError):
    """An invalid configuration: names the file or flag and the key."""


class CheckpointError(OrdoError):
    """A missing, truncated or incompatible checkpoint."""
