"""The registry of methods: a name, a config dataclass, and what the method replaces or adds.

Registering a method registers its options with it, as fairseq's ``register_criterion`` does a criterion's
dataclass: the registry is the one :data:`ordo.config.METHODS` reads to check ``model.methods.NAME`` when a
run's config is built, so the config knows every method's options without importing a method module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ordo.config import METHODS as REGISTERED
from ordo.errors import ConfigError
from ordo.losses import AuxLoss
from ordo.models.slots import Slots


def _no_losses(method_cfg: Any) -> list[AuxLoss]:
    return []


@dataclass
class Method:
    """One method that ``model.methods.<name>`` switches on.

    Attributes:
        name: its config key, also the module name in ``ordo/methods``.
        config_class: dataclass of its options (``Literal`` fields for fixed choices, its own range checks in
            ``__post_init__``); the config builds it from ``model.methods.NAME``, where an unknown key, a wrong
            type or a bad value is an error.
        apply: fills the sub-blocks it replaces, ``apply(slots, method_cfg)`` using ``slots.claim``.
        losses: the auxiliary losses it adds, ``losses(method_cfg)``.
        fields: batch fields (``Batch.fields``) the data must provide.
    """

    name: str
    config_class: type
    apply: Callable[[Slots, Any], None]
    losses: Callable[[Any], list[AuxLoss]] = _no_losses
    fields: tuple[str, ...] = field(default_factory=tuple)


METHODS = cast("dict[str, Method]", REGISTERED)  # the same mapping, holding whole methods


def check_reach(slots: Slots, key: str, reach: float) -> None:
    """Refuse a distance in positions (a window, a clip) that reaches past the longest sequence the model takes
    (``model.max_positions``): every sentence lies inside it, and the memory the method needs grows with it
    until it fails.

    Raises:
        ConfigError: naming ``key`` and the limit.
    """
    if reach >= slots.cfg.max_positions:
        raise ConfigError(f"{key}: {reach} must be below model.max_positions={slots.cfg.max_positions}")


def register_method(method: Method) -> Method:
    """Add ``method`` to :data:`METHODS`; a second method under the same name is an error."""
    if method.name in METHODS:
        raise ValueError(f"method {method.name!r} is registered twice")
    METHODS[method.name] = method
    return method
