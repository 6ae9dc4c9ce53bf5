"""Strict config loading: unknown keys, types, presets, overrides, the methods' options, saving."""

import re
import subprocess
import sys

import pytest

import ordo.methods  # noqa: F401  (registers every method and its options)
from ordo.choices import literal_fields
from ordo.cli import main
from ordo.config import (
    METHODS,
    PRESETS,
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
from ordo.methods.future_cost import FutureCostConfig


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


def test_an_unknown_preset_is_refused_once_by_its_choice_field_with_the_closest_one():
    with pytest.raises(ConfigError, match=r"--set: model\.preset: 'smal' is not one of tiny, small, .* "
                                          r"\(did you mean small\?\)"):
        load_config(None, ["model.preset=smal"])
    with pytest.raises(ConfigError, match=r"model\.preset: 'huge' is not one of"):
        build_config({"model": {"preset": "huge"}})
    assert set(PRESETS) == set(literal_fields(ModelConfig)["preset"])  # every choice has its preset


def test_overrides_parse_yaml_scalars_and_nest():
    nested = parse_overrides(["train.lr=5e-4", "model.methods.toy.weight=2", "train.valid_bleu=false"])
    assert nested == {"train": {"lr": 5e-4, "valid_bleu": False}, "model": {"methods": {"toy": {"weight": 2}}}}
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_overrides(["train.lr"])


def test_int_accepted_for_float_and_tuple_from_list():
    cfg = build_config({"train": {"lr": 1, "adam_betas": [0.9, 0.997]}})
    assert isinstance(cfg.train.lr, float) and cfg.train.adam_betas == (0.9, 0.997)


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(None, ["model.preset=tiny", "train.seed=7", "model.methods.future_cost.model=1",
                             "model.methods.lattice_pe={}"])
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


def test_a_negative_output_length_factor_is_refused_rather_than_giving_empty_translations():
    from ordo.config import replace_checked

    with pytest.raises(ConfigError, match="decode.max_len_a: -1.0 is below its minimum 0"):
        replace_checked(DecodeConfig(), "decode", max_len_a=-1.0)
    assert replace_checked(DecodeConfig(), "decode", max_len_a=0.0).max_len_a == 0.0


@pytest.mark.parametrize(("override", "message"), [
    ("model.d_model=0", "model.d_model: 0 is below its minimum 1"),
    ("model.heads=0", "model.heads: 0 is below its minimum 1"),
    ("model.d_model=33", "model.heads: d_model 33 does not split into 4 heads"),
    ("model.dropout=1.5", "model.dropout: 1.5 must be below 1"),
    ("model.dropout=-0.1", "model.dropout: -0.1 is below its minimum 0"),
    ("model.max_positions=0", "model.max_positions: 0 is below its minimum 2"),
    ("train.lr=-1", "train.lr: -1.0 is below its minimum 0"),
    ("train.max_steps=-5", "train.max_steps: -5 is below its minimum 0"),
    ("train.max_minutes=-1", "train.max_minutes: -1.0 is below its minimum 0"),
    ("train.label_smoothing=1.5", "train.label_smoothing: 1.5 must be below 1"),
    ("train.seed=-1", "train.seed: -1 is below its minimum 0"),
    ("train.adam_betas=[1.5, 0.98]", r"train.adam_betas\[0\]: 1.5 is not in \[0, 1\)"),
])
def test_an_out_of_range_setting_is_refused_when_the_config_is_built(override, message):
    """Each of these trained silently (a negative max_steps or lr), or failed later with a traceback."""
    with pytest.raises(ConfigError, match=f"--set: {message}"):
        load_config(None, [override])


def test_heads_need_not_divide_the_width_of_an_rnn():
    assert load_config(None, ["model.preset=rnn-tiny", "model.d_model=30"]).model.d_model == 30


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


@pytest.mark.parametrize(("override", "message"), [
    ("model.methods.distortion.context=hiden",
     r"model\.methods\.distortion\.context: 'hiden' is not one of source, target, hidden \(did you mean hidden\?\)"),
    ("model.methods.reorder_emb.variant=encoders",
     r"model\.methods\.reorder_emb\.variant: 'encoders' is not one of encoder, decoder, both \(did you mean encoder\?\)"),
    ("model.methods.future_cost.model=3", r"model\.methods\.future_cost\.model: 3 is not one of 1, 2"),
    ("model.methods.future_cost.model=true", r"model\.methods\.future_cost\.model: True is not one of 1, 2"),
    ("model.methods.future_cost.model='2'", r"model\.methods\.future_cost\.model: '2' is not one of 1, 2 \(did you mean 2\?\)"),
    ("model.methods.future_cost.wieght=0.5", r"model\.methods\.future_cost\.wieght: unknown key \(did you mean weight\?\)"),
    ("model.methods.refsr.hardwindow=false",
     r"model\.methods\.refsr\.hardwindow: unknown key \(did you mean hard_window\?\)"),
    ("model.methods.relative_pe.clip=wide", r"model\.methods\.relative_pe\.clip: expected int, got 'wide'"),
    ("model.methods.exgre.hard_window=maybe", r"model\.methods\.exgre\.hard_window: expected bool, got 'maybe'"),
    ("model.methods.future_cost.gate_bias=closed", r"model\.methods\.future_cost\.gate_bias: expected float"),
    ("model.methods.lattice_pe.on=true", r"model\.methods\.lattice_pe\.on: unknown key \(known keys: \)"),
    ("model.methods.lattice_pe=true", r"model\.methods\.lattice_pe: expected a mapping, got True"),
    ("model.methods.distorsion.context=hidden", r"model\.methods\.distorsion: unknown method \(did you mean distortion\?\)"),
    ("model.methods.refsr.window=0", r"model\.methods\.refsr\.window: expected a positive finite window, got 0"),
    ("model.methods.distortion.weight=1.5", r"model\.methods\.distortion\.weight: expected λ in \[0, 1\], got 1\.5"),
])
def test_a_misspelt_method_option_fails_when_the_config_is_built(override, message):
    with pytest.raises(ConfigError, match=f"^--set: {message}"):
        load_config(None, ["model.preset=rnn-tiny", override])


def test_a_method_option_in_a_yaml_file_is_checked_with_the_file_named(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("model:\n  methods:\n    distortion: {contxt: hidden}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: model.methods.distortion.contxt: unknown key "
                                                    "(did you mean context?)")):
        load_config(path)


def test_ordo_train_refuses_a_misspelt_method_option_before_it_reads_the_data(tmp_path, capsys):
    missing = tmp_path / "no_data"
    code = main(["train", "--data", str(missing), "--out", str(tmp_path / "run"),
                 "--set", "model.methods.distortion.context=hiden"])
    err = capsys.readouterr().err
    assert code == 2
    assert "ordo train: error: --set: model.methods.distortion.context: 'hiden' is not one of" in err
    assert "did you mean hidden?" in err and str(missing) not in err
    assert not (tmp_path / "run").exists()


def test_every_value_of_every_choice_field_of_every_method_is_accepted():
    for name, method in METHODS.items():
        for field_name, options in literal_fields(method.config_class).items():
            for option in options:
                cfg = build_config({"model": {"methods": {name: {field_name: option}}}})
                assert getattr(cfg.model.methods[name], field_name) == option


def test_the_methods_options_are_typed_and_filled_with_their_defaults():
    cfg = load_config(None, ["model.methods.future_cost.weight=1", "model.methods.lattice_pe="])
    options = cfg.model.methods["future_cost"]
    assert options == FutureCostConfig(weight=1.0) and isinstance(options.weight, float)
    assert type(cfg.model.methods["lattice_pe"]) is METHODS["lattice_pe"].config_class
    assert ModelConfig(methods={"future_cost": options}).methods["future_cost"] is options
    with pytest.raises(ConfigError, match=r"model\.methods\.future_cost\.gate_bias: Model II's gate option"):
        ModelConfig(methods={"future_cost": {"model": 1, "gate_bias": -3.0}})


def test_the_resolved_config_shows_every_option_of_every_method(tmp_path):
    cfg = load_config(None, ["model.methods.future_cost.model=1", "model.methods.additional_pe={}",
                             "model.methods.relative_pe.clip=4"])
    save_config(cfg, tmp_path / "config.yaml")
    methods = read_yaml(tmp_path / "config.yaml")["model"]["methods"]
    assert methods["future_cost"] == {"model": 1, "weight": 0.7, "sample_fraction": 1.0, "detach_state": False,
                                      "own_output": False, "gate_bias": None}
    assert methods["additional_pe"] == {} and methods["relative_pe"] == {"clip": 4, "decoder": True}


# A run's config.yaml as ordo wrote it before the methods' options were typed (at 88f0dad): each method's section
# held only the keys that were set, an option-less method an empty mapping or nothing
OLD_RUN_CONFIG = """\
data: work/data
model:
  preset: small
  family: transformer
  d_model: 256
  embed_dim: 0
  ffn_dim: 1024
  heads: 4
  encoder_layers: 3
  decoder_layers: 3
  dropout: 0.2
  attention_dropout: 0.0
  activation_dropout: 0.0
  norm: post
  share_embeddings: all
  max_positions: 1024
  methods:
    future_cost:
      model: 2
      weight: 0.5
    refsr:
      hard_window: false
    lattice_pe: {}
    additional_pe:
train:
  seed: 1
  max_tokens: 3000
  num_workers: 2
  lr: 0.001
decode:
  beam_size: 5
schema_version: 1
"""


def test_an_older_runs_config_still_loads_with_its_methods_options_filled_in(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(OLD_RUN_CONFIG)
    cfg = build_config(read_yaml(path), str(path))
    methods = cfg.model.methods
    assert methods["future_cost"] == FutureCostConfig(model=2, weight=0.5)
    assert (methods["refsr"].hard_window, methods["refsr"].window, methods["refsr"].weight) == (False, 0.5, 0.6)
    assert set(methods) == {"future_cost", "refsr", "lattice_pe", "additional_pe"}
    save_config(cfg, tmp_path / "again.yaml")
    assert build_config(read_yaml(tmp_path / "again.yaml")) == cfg


def test_the_config_module_imports_no_method_module():
    code = ("import sys, ordo.config\n"
            "loaded = [m for m in sys.modules if m.startswith('ordo.methods')]\n"
            "assert not loaded, loaded\n"
            "try:\n"
            "    ordo.config.build_config({'model': {'methods': {'exgre': {}}}})\n"
            "except ordo.config.ConfigError as err:\n"
            "    assert 'none registered: import ordo.methods' in str(err), err\n"
            "else:\n"
            "    raise AssertionError('an unregistered method was accepted')\n")
    subprocess.run([sys.executable, "-c", code], check=True)
