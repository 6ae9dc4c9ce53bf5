"""Strict config loading: unknown keys, types, presets, overrides, saving."""

import pytest

from ordo.config import (
    DecodeConfig,
    ExperimentConfig,
    ModelConfig,
    TrainConfig,
    build_config,
    load_config,
    parse_overrides,
    save_config,
)
from ordo.data.textio import read_yaml
from ordo.errors import ConfigError


def test_unknown_key_names_file_and_suggests(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("train:\n  warmup: 100\n")
    with pytest.raises(ConfigError, match=r"exp.yaml: train.warmup: unknown key \(did you mean warmup_steps\?\)"):
        load_config(path)


def test_wrong_type_is_an_error():
    with pytest.raises(ConfigError, match="train.max_tokens: expected int"):
        load_config(None, ["train.max_tokens=lots"])


def test_preset_fills_only_missing_fields():
    cfg = load_config(None, ["model.preset=base", "model.dropout=0.3"])
    assert (cfg.model.d_model, cfg.model.heads, cfg.model.encoder_layers) == (512, 8, 6)
    assert cfg.model.dropout == 0.3
    tiny = load_config(None, ["model.preset=tiny"]).model
    assert tiny.d_model < cfg.model.d_model


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'huge'"):
        load_config(None, ["model.preset=huge"])


def test_overrides_parse_yaml_scalars_and_nest():
    nested = parse_overrides(["train.lr=5e-4", "model.methods.toy.weight=2", "train.valid_bleu=false"])
    assert nested == {"train": {"lr": 5e-4, "valid_bleu": False}, "model": {"methods": {"toy": {"weight": 2}}}}
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_overrides(["train.lr"])


def test_int_accepted_for_float_and_tuple_from_list():
    cfg = build_config({"train": {"lr": 1, "adam_betas": [0.9, 0.997]}})
    assert isinstance(cfg.train.lr, float) and cfg.train.adam_betas == (0.9, 0.997)


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(None, ["model.preset=tiny", "train.seed=7", "model.methods.x.a=1"])
    save_config(cfg, tmp_path / "config.yaml")
    again = build_config(read_yaml(tmp_path / "config.yaml"))
    assert again == cfg
    assert isinstance(again, ExperimentConfig) and again.schema_version == cfg.schema_version


def test_newer_schema_rejected():
    with pytest.raises(ConfigError, match="newer"):
        build_config({"schema_version": 999})


def test_a_choice_typo_is_refused_with_the_closest_value_and_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  best_metric: lose\n")
    with pytest.raises(ConfigError, match=r"run.yaml: train.best_metric: 'lose' is not one of bleu, loss \(did you mean loss\?\)"):
        load_config(path)


@pytest.mark.parametrize(("cls", "section"), [(ModelConfig, "model"), (TrainConfig, "train"), (DecodeConfig, "decode")])
def test_every_value_of_every_choice_field_is_accepted(cls, section):
    from ordo.choices import literal_fields

    for name, options in literal_fields(cls).items():
        for option in options:
            assert getattr(getattr(load_config(None, [f"{section}.{name}={option}"]), section), name) == option


def test_changed_decode_settings_are_checked_like_a_config_file():
    from ordo.config import replace_checked

    decode = DecodeConfig()
    assert replace_checked(decode, "decode", beam_size=2).beam_size == 2
    with pytest.raises(ConfigError, match="decode.beam_size: 0 is below its minimum 1"):
        replace_checked(decode, "decode", beam_size=0)
    with pytest.raises(ConfigError, match=r"decode.beam: unknown key \(did you mean beam_size\?\)"):
        replace_checked(decode, "decode", beam=3)
    with pytest.raises(ConfigError, match="decode.amp: 'bf8' is not one of"):
        replace_checked(decode, "decode", amp="bf8")
    with pytest.raises(ConfigError, match="decode.nbest: 3 hypotheses from a beam of 2"):
        replace_checked(decode, "decode", beam_size=2, nbest=3)


def test_numbers_in_a_yaml_file_work_as_users_write_them(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("train:\n  lr: 1e-3\n  adam_eps: 1E-8\n  warmup_steps: 400\n")
    cfg = load_config(path)
    assert (cfg.train.lr, cfg.train.adam_eps, cfg.train.warmup_steps) == (1e-3, 1e-8, 400)


def test_a_bad_value_names_the_yaml_file_and_the_overrides(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("train:\n  lr: fast\n")
    with pytest.raises(ConfigError, match=r"exp\.yaml: train\.lr: expected float, got 'fast'"):
        load_config(path)
    path.write_text("train:\n  lr: 1e-3\n")
    with pytest.raises(ConfigError, match=r"exp\.yaml \+ --set: train\.max_tokens: expected int"):
        load_config(path, ["train.max_tokens=lots"])


def test_a_retired_key_in_an_old_run_config_is_ignored_but_not_written_back(tmp_path):
    cfg = build_config({"train": {"num_workers": 4, "lr": 1e-3}}, "old/config.yaml")
    assert cfg.train.lr == 1e-3 and not hasattr(cfg.train, "num_workers")
    save_config(cfg, tmp_path / "config.yaml")
    assert "num_workers" not in read_yaml(tmp_path / "config.yaml")["train"]
