"""Strict, typed experiment configuration: dataclasses loaded from YAML and ``--set`` overrides.

An unknown key is an error that names where it was found and suggests the nearest known key. Every
field has a default and a comment; the resolved config is written next to the model with its
``schema_version``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import yaml

from ordo.choices import check_choices, did_you_mean
from ordo.data.textio import atomic_write, parse_yaml, read_yaml
from ordo.errors import ConfigError

SCHEMA_VERSION = 1

Preset = Literal["tiny", "small", "base", "big", "rnn-tiny", "rnn-small", "rnn-base"]
AmpMode = Literal["auto", "bf16", "fp16", "off"]  # mixed precision (ordo.precision)
CpuGemm = Literal["auto", "onednn", "blas"]  # where float32 linear layers multiply on CPU (ordo.gemm)
CompileMode = Literal["off", "default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"]

T = TypeVar("T")


class RegisteredMethod(Protocol):
    """A method as the config sees it (``ordo.methods.registry.Method``): the dataclass of its options."""

    @property
    def config_class(self) -> type:
        """The dataclass of ``model.methods.NAME``'s options, each field with its type and default."""


# model.methods.NAME -> its method, filled by ordo.methods.registry.register_method (which every method module
# calls when ``ordo.methods`` is imported, as ordo.build does): the config checks each method's section against
# the dataclass registered with it, and needs no method module to do so
METHODS: dict[str, RegisteredMethod] = {}


@dataclass
class ModelConfig:
    """Architecture of the baseline and the methods switched on over it (docs/config.md, docs/methods.md)."""

    preset: Preset = "small"  # fills the fields the config leaves out (PRESETS)
    family: Literal["transformer", "rnn"] = "transformer"  # rnn: attention RNN, RNNsearch*
    d_model: int = 256  # model width d (family rnn: the GRU state width)
    embed_dim: int = 0  # family rnn: word embedding width (0: d_model)
    ffn_dim: int = 1024  # hidden width of the position-wise feed-forward network
    heads: int = 4  # attention heads
    encoder_layers: int = 3  # N encoder layers
    decoder_layers: int = 3  # N decoder layers
    dropout: float = 0.1  # dropout on sub-block outputs and embeddings
    attention_dropout: float = 0.0  # dropout on attention weights
    activation_dropout: float = 0.0  # dropout inside the feed-forward network
    norm: Literal["post", "pre"] = "post"  # post: LN after the residual, as the papers' equations
    share_embeddings: Literal["all", "decoder", "none"] = "all"  # all: source, target, output (joint vocabulary)
    max_positions: int = 1024  # size of the sinusoidal position table
    methods: dict[str, Any] = field(default_factory=dict)  # method name -> its options (the dataclass registered
    # with the method, docs/methods.md); a mapping is checked and filled with the defaults it leaves out

    def __post_init__(self) -> None:
        check_choices(self, "model")
        _at_least(self, "model", d_model=1, embed_dim=0, ffn_dim=1, heads=1, encoder_layers=0, decoder_layers=0,
                  dropout=0, attention_dropout=0, activation_dropout=0, max_positions=2)
        _below(self, "model", dropout=1, attention_dropout=1, activation_dropout=1)
        if self.family == "transformer" and self.d_model % self.heads:
            raise ConfigError(f"model.heads: d_model {self.d_model} does not split into {self.heads} heads")
        self.methods = {name: method_options(name, section) for name, section in self.methods.items()}


def method_options(name: str, section: Any) -> Any:
    """The options of method ``name`` as the dataclass registered with it, from a mapping (a config section;
    None or "" for a method without options) or that dataclass itself.

    Raises:
        ConfigError: an unknown method, or an unknown key, wrong type or bad value in its section, naming
            ``model.methods.NAME.key`` and the closest known name.
    """
    where = f"model.methods.{name}"
    method = METHODS.get(name)
    if method is None:
        known = ", ".join(sorted(METHODS)) or "none registered: import ordo.methods"
        raise ConfigError(f"{where}: unknown method{did_you_mean(name, METHODS) or f' (known: {known})'}")
    if isinstance(section, method.config_class):
        return section
    return from_dict(method.config_class, {} if section is None or section == "" else section, where)


@dataclass
class TrainConfig:
    """Optimisation, batching, validation and checkpointing (docs/config.md)."""

    seed: int = 1  # seeds model init, dropout and batch order
    max_tokens: int = 4096  # padded tokens per batch per process, counted on the side batch_by names
    batch_by: Literal["longer", "target"] = "longer"  # which side of each pair counts: the longer, or the target
    target_bucket: int = 0  # batch_by target, N > 0: sort by source length within target buckets of N
    update_freq: int = 1  # gradient accumulation: batches per update
    max_steps: int = 0  # stop after this many updates (0: no limit)
    max_epochs: int = 0  # stop after this many epochs (0: no limit)
    max_minutes: float = 0.0  # stop after this much training wall time (0: no limit)
    lr: float = 7e-4  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 4000  # linear warm-up, then inverse square root decay
    warmup_init_lr: float = 1e-7  # learning rate at step 0
    adam_betas: tuple[float, float] = (0.9, 0.98)  # Adam beta1, beta2
    adam_eps: float = 1e-9  # Adam epsilon
    weight_decay: float = 0.0  # decoupled weight decay (AdamW); 0 is plain Adam
    clip_norm: float = 0.0  # gradient norm clipping (0: off)
    label_smoothing: float = 0.1  # label smoothing epsilon
    init_from: str = ""  # a checkpoint whose weights initialise a new run (its missing parameters stay random)
    valid_every: int = 1000  # validate every K updates (and at the end)
    valid_bleu: bool = True  # decode the dev set and report BLEU at each validation
    valid_beam: int = 1  # beam size for validation BLEU (1: greedy)
    valid_max_sentences: int = 0  # score BLEU on the first N dev sentences only (0: all)
    best_metric: Literal["bleu", "loss"] = "bleu"  # which dev figure selects the best checkpoint
    patience: int = 0  # stop after this many validations without improvement (0: never)
    keep_last: int = 5  # keep the last N periodic checkpoints
    log_every: int = 100  # log training loss every N updates
    amp: AmpMode = "auto"  # auto: bf16 on CUDA and on a CPU with native bf16 (ordo.precision), off elsewhere
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int = 0  # torch CPU threads (0: leave torch's default)
    cpu_gemm: CpuGemm = "auto"  # float32 linear layers on CPU: oneDNN or torch's BLAS; auto: where it wins (ordo.gemm)
    compile: CompileMode = "off"  # torch.compile the forward pass and losses in this mode (ordo.training.compiled)
    pad_multiple: int = 0  # pad each training batch's lengths to a multiple of N; 0: 8 when compiled, else 1
    progress: bool = True  # show a progress bar on stderr

    def __post_init__(self) -> None:
        check_choices(self, "train")
        if self.target_bucket < 0 or (self.target_bucket and self.batch_by != "target"):
            raise ConfigError(f"train.target_bucket: a width >= 1 with train.batch_by: target, or 0; "
                              f"got {self.target_bucket} with batch_by {self.batch_by}")
        _at_least(self, "train", max_tokens=1, update_freq=1, valid_every=1, keep_last=1, log_every=1, valid_beam=1,
                  pad_multiple=0, seed=0, max_steps=0, max_epochs=0, max_minutes=0, warmup_steps=0, warmup_init_lr=0,
                  adam_eps=0, weight_decay=0, clip_norm=0, label_smoothing=0, valid_max_sentences=0, patience=0,
                  threads=0, lr=0)
        _below(self, "train", label_smoothing=1)
        for index, beta in enumerate(self.adam_betas):
            if not 0 <= beta < 1:
                raise ConfigError(f"train.adam_betas[{index}]: {beta} is not in [0, 1)")


@dataclass
class DecodeConfig:
    """Search settings used by ``ordo translate`` (docs/config.md: beam 4-5 with length normalisation)."""

    beam_size: int = 5  # 1 means greedy search
    length_penalty: float = 1.0  # score = log-prob / length ** length_penalty
    max_len_a: float = 1.2  # maximum output length = a * source length + b
    max_len_b: int = 10
    min_len: int = 0  # no EOS before this many output tokens
    nbest: int = 1  # hypotheses written per sentence
    max_tokens: int = 6000  # source tokens per translation batch
    long_lines: Literal["truncate", "error"] = "truncate"  # a source over model.max_positions-1 tokens: cut it
    # to the limit with a warning naming the line, or stop with an error naming it
    amp: AmpMode = "off"  # auto: bf16 on CUDA and on a CPU with native bf16; search under autocast, scores in
    # float32; the trainer's dev BLEU runs under train.amp when this is off
    cpu_gemm: CpuGemm = "auto"  # float32 linear layers on CPU: oneDNN or torch's BLAS; auto: where it wins
    # (ordo.gemm), oneDNN on its packed copy of each weight, which a loaded run's wide layers hold in place of
    # their own (ordo.decoding.packed; blas: the least memory)

    def __post_init__(self) -> None:
        check_choices(self, "decode")
        _at_least(self, "decode", beam_size=1, nbest=1, max_tokens=1, max_len_a=0, max_len_b=0, min_len=0)
        if self.nbest > self.beam_size:
            raise ConfigError(f"decode.nbest: {self.nbest} hypotheses from a beam of {self.beam_size}")


@dataclass
class ExperimentConfig:
    """One training run: data directory, model, training and decoding sections."""

    data: str = ""  # directory written by `ordo prepare`, or shards DIR1:DIR2:... (epoch e trains on shard (e-1) mod n;
    # the first gives the validation split and the vocabularies: ordo.data.shards)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    schema_version: int = SCHEMA_VERSION  # version of this layout, stored with every run


RETIRED = {"train": {"num_workers"}}  # keys that never did anything, removed; older runs' configs still load

PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"d_model": 64, "ffn_dim": 256, "heads": 2, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.1},
    "small": {"d_model": 256, "ffn_dim": 1024, "heads": 4, "encoder_layers": 3, "decoder_layers": 3, "dropout": 0.1},
    "base": {"d_model": 512, "ffn_dim": 2048, "heads": 8, "encoder_layers": 6, "decoder_layers": 6, "dropout": 0.1},
    "big": {"d_model": 1024, "ffn_dim": 4096, "heads": 16, "encoder_layers": 6, "decoder_layers": 6, "dropout": 0.3},
    # RNNsearch* (paper 003 §2); rnn-base is the paper's size: 620-dim embeddings, 1000-dim GRUs
    "rnn-tiny": {"family": "rnn", "d_model": 64, "embed_dim": 64, "dropout": 0.1},
    "rnn-small": {"family": "rnn", "d_model": 256, "embed_dim": 256, "dropout": 0.2},
    "rnn-base": {"family": "rnn", "d_model": 1000, "embed_dim": 620, "dropout": 0.2},
}


def _join(where: str, key: str) -> str:
    """``config.yaml: train`` + ``lr`` -> ``config.yaml: train.lr``; ``config.yaml:`` + ``train`` -> ``config.yaml: train``."""
    if not where:
        return key
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def _unknown_key(key: str, known: list[str], where: str) -> ConfigError:
    hint = did_you_mean(key, known) or f" (known keys: {', '.join(sorted(known))})"
    return ConfigError(f"{_join(where, key)}: unknown key{hint}")


def _at_least(config: Any, section: str, **minimum: float) -> None:
    """Raise a ConfigError naming ``section.field`` for a numeric field under its minimum."""
    for name, low in minimum.items():
        if getattr(config, name) < low:
            raise ConfigError(f"{section}.{name}: {getattr(config, name)} is below its minimum {low}")


def _below(config: Any, section: str, **bound: float) -> None:
    """Raise a ConfigError naming ``section.field`` for a numeric field not below its (excluded) upper bound."""
    for name, high in bound.items():
        if getattr(config, name) >= high:
            raise ConfigError(f"{section}.{name}: {getattr(config, name)} must be below {high}")


def replace_checked(config: T, where: str, **changes: Any) -> T:
    """``dataclasses.replace`` of a settings dataclass, with every change checked as a config file's would be:
    an unknown field (with the closest name) or a bad value is a ConfigError naming ``where.field``."""
    names = [f.name for f in dataclasses.fields(config)]  # type: ignore[arg-type]
    hints = typing.get_type_hints(type(config))
    for key, value in changes.items():
        if key not in names:
            raise _unknown_key(key, names, where)
        changes[key] = _coerce(value, hints[key], _join(where, key))
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Check ``value`` against the type ``hint`` and convert what YAML cannot express (tuples, floats)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        origin = typing.get_origin(hint)
    if origin is typing.Literal and isinstance(value, bool):  # YAML 1.1 reads off/no/on/yes as booleans
        spellings = ("on", "yes", "true") if value else ("off", "no", "false")
        return next((s for s in spellings if s in typing.get_args(hint)), value)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, where)  # type: ignore[arg-type]
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{where}: expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and not (isinstance(value, hint) and not (hint is int and isinstance(value, bool))):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, rejecting unknown keys and wrong types.

    Args:
        cls: a dataclass type.
        data: a mapping (e.g. parsed YAML); None means all defaults.
        where: the dotted path used in error messages, e.g. ``"config.yaml: train"``.

    Raises:
        ConfigError: naming ``where.key`` for an unknown key (with the closest known key) or a bad value.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise _unknown_key(str(key), names, where)
        kwargs[key] = _coerce(value, hints[key], _join(where, key))
    try:
        return cls(**kwargs)
    except ConfigError as err:  # a field's check in __post_init__: name the file too
        source = where.partition(":")[0]
        raise ConfigError(f"{source}: {err}" if source and not str(err).startswith(source) else str(err)) from None


def to_dict(config: Any) -> dict[str, Any]:
    """A plain, YAML-serialisable dict of a config dataclass (tuples become lists)."""

    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return plain(dataclasses.asdict(config))


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """Turn ``["train.lr=5e-4", "model.methods.reorder_emb.variant=both"]`` into a nested dict.

    Values are parsed as YAML scalars (``5e-4`` is a float, ``true`` a bool, ``[1, 2]`` a list).
    """
    nested: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item}: expected KEY=VALUE")
        key, raw = item.split("=", 1)
        value = parse_yaml(raw) if raw.strip() else ""
        node = nested
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item}: {part} is not a section")
        node[parts[-1]] = value
    return nested


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge: values of ``update`` win; nested mappings are merged key by key."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def apply_preset(model_section: dict[str, Any]) -> dict[str, Any]:
    """Fill the fields a model section leaves out from its preset; explicit keys win. An unknown preset fills
    nothing: :class:`ModelConfig` refuses it, with the closest one."""
    preset = model_section.get("preset", ModelConfig.preset)
    return merge(PRESETS.get(preset, {}) if isinstance(preset, str) else {}, model_section)


def _drop_retired(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` without the keys of :data:`RETIRED`, which the configs of older runs still hold."""
    raw = dict(raw)
    for section, keys in RETIRED.items():
        if isinstance(raw.get(section), dict):
            raw[section] = {k: v for k, v in raw[section].items() if k not in keys}
    return raw


def build_config(raw: dict[str, Any], where: str = "config") -> ExperimentConfig:
    """Validate a raw nested dict (YAML plus overrides) into an :class:`ExperimentConfig`."""
    raw = _drop_retired(raw)
    raw["model"] = apply_preset(dict(raw.get("model") or {}))
    config = from_dict(ExperimentConfig, raw, f"{where}:")
    if config.schema_version > SCHEMA_VERSION:
        raise ConfigError(f"{where}: schema_version {config.schema_version} is newer than this ordo ({SCHEMA_VERSION})")
    return config


def load_raw(path: str | Path | None = None, overrides: list[str] | None = None,
             flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """A YAML experiment config (optional), updated by ``flags`` (a nested mapping, e.g. a command line's
    ``--data``), then by ``--set key=value`` overrides; not yet checked."""
    raw = merge(read_yaml(path) if path else {}, flags or {})
    return merge(raw, parse_overrides(overrides or []))


def raw_source(path: str | Path | None = None, overrides: list[str] | None = None) -> str:
    """What :func:`load_raw` read, for errors: ``exp.yaml``, ``exp.yaml + --set``, ``--set`` or ``config``."""
    parts = ([str(path)] if path else []) + (["--set"] if overrides else [])
    return " + ".join(parts) or "config"


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> ExperimentConfig:
    """Load a YAML experiment config (optional) and apply ``--set key=value`` overrides, checked."""
    return build_config(load_raw(path, overrides), raw_source(path, overrides))


def save_config(config: ExperimentConfig, path: str | Path) -> None:
    """Write the resolved config as YAML, atomically."""
    with atomic_write(path) as handle:
        yaml.safe_dump(to_dict(config), handle, sort_keys=False)
