"""Settings with a fixed set of values: ``typing.Literal`` fields of the settings dataclasses (the run's config,
``ordo prepare``'s), checked once, when the dataclass is built (from YAML, ``--set`` or ``dataclasses.replace``),
with the closest allowed value in the message. The command line takes its ``choices`` from the same types."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Iterable
from typing import Any

from ordo.errors import ConfigError


def did_you_mean(value: str, options: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``options``, or an empty string when none is close."""
    guess = difflib.get_close_matches(value, list(options), n=1)
    return f" (did you mean {guess[0]}?)" if guess else ""


@functools.cache
def literal_fields(cls: type) -> dict[str, tuple[Any, ...]]:
    """The ``Literal``-typed fields of dataclass ``cls`` (``X | None`` unwrapped) with their allowed values."""
    hints = typing.get_type_hints(cls)
    found = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if typing.get_origin(hint) is not typing.Literal and len(options) == 1:
            hint = options[0]
        if typing.get_origin(hint) is typing.Literal:
            found[field.name] = typing.get_args(hint)
    return found


def choices(cls: type, name: str) -> list[str]:
    """The allowed values of field ``name`` of dataclass ``cls``, as strings (for argparse ``choices``)."""
    return [str(option) for option in literal_fields(cls)[name]]


def check_choices(config: object, section: str) -> None:
    """Raise a :class:`ConfigError` naming ``section.field`` for a Literal field whose value is not allowed; the
    value's type counts (``true`` is not ``1``, nor ``"2"`` ``2``)."""
    cls: type = type(config)
    for name, options in literal_fields(cls).items():
        value = getattr(config, name)
        if value is not None and not any(value == option and type(value) is type(option) for option in options):
            allowed = ", ".join(str(option) for option in options)
            hint = did_you_mean(str(value), [str(option) for option in options])
            raise ConfigError(f"{section}.{name}: {value!r} is not one of {allowed}{hint}")
