"""Training on shards (``--data DIR1:DIR2:...``): epochs take the shards in turn, a shard with another
vocabulary is refused by name, resume part-way through the second shard is exact, and the loss falls."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch

from ordo import api
from ordo.build import build_model
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.cli import main
from ordo.data.batching import epoch_batches
from ordo.data.corpus import DataMeta, ParallelData
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.shards import vocab_digest
from ordo.errors import InputError
from ordo.training.trainer import Trainer


def shards_setting(dirs) -> str:
    """The ``data`` setting of ``dirs``."""
    return ":".join(str(d) for d in dirs)


def shard_pairs(dirs) -> list[int]:
    """The training pairs of each shard."""
    return [DataMeta.load(d).splits["train"] for d in dirs]


def test_epoch_e_reads_every_pair_of_shard_e_minus_1_mod_n_once(sharded_data, tiny_config, tmp_path, caplog):
    cfg = tiny_config(shards_setting(sharded_data), "train.max_epochs=4")
    pairs = shard_pairs(sharded_data)
    assert len(set(pairs)) == len(pairs)  # a batch list from another shard would not cover its rows
    trainer = Trainer(build_model(cfg.model, 200, 200).model, cfg, tmp_path / "run")
    seen: dict[int, list[np.ndarray]] = {}
    with caplog.at_level(logging.INFO, logger="ordo.train"):
        for group in trainer.updates():
            shard = sharded_data[(trainer.progress.epoch - 1) % len(sharded_data)]
            assert trainer.batches.train_data.src.prefix.parent == shard and trainer.progress.shard == str(shard)
            seen.setdefault(trainer.progress.epoch, []).extend(group)
    assert sorted(seen) == [1, 2, 3, 4]
    for epoch, batches in seen.items():
        rows = np.sort(np.concatenate(batches))
        assert rows.tolist() == list(range(pairs[(epoch - 1) % len(pairs)]))  # the shard, whole, once
    assert f"epoch 3 | shard 3 of 3: {sharded_data[2]} ({pairs[2]} pairs)" in caplog.text


def test_a_shard_with_another_vocabulary_is_refused_naming_it(sharded_data, tiny_config, tmp_path):
    text = sharded_data[1] / "train"
    other = tmp_path / "other"
    prepare(PrepareConfig(train_src=f"{text}.src.txt", train_tgt=f"{text}.tgt.txt", out=str(other), vocab_size=150),
            progress=False)
    with pytest.raises(InputError, match=f"{re.escape(str(other))}: its vocabulary differs from that of "
                                         f"{re.escape(str(sharded_data[0]))}"):
        api.train(tiny_config(shards_setting([sharded_data[0], other]), "train.max_steps=1"), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_run_with_checkpoints_is_not_resumed_on_data_of_another_vocabulary(sharded_data, tiny_config, tmp_path):
    """Before, the run's vocab/ was replaced by the other data's and the resume failed on the embedding shapes
    (or, at equal sizes, went on with the wrong pieces), leaving the run translating with the wrong vocabulary."""
    text = sharded_data[1] / "train"
    other = tmp_path / "other"
    prepare(PrepareConfig(train_src=f"{text}.src.txt", train_tgt=f"{text}.tgt.txt", out=str(other), vocab_size=150),
            progress=False)
    run = tmp_path / "run"
    api.train(tiny_config(sharded_data[0], "train.max_steps=1"), run)
    vocab = (run / "vocab" / "src.model").read_bytes()
    with pytest.raises(InputError, match=f"{re.escape(str(other))}: its vocabulary differs from the one run "
                                         f"{re.escape(str(run))} was trained with"):
        api.train(api.run_config(run, {"data": str(other), "train": {"max_steps": 2}}), run)
    assert (run / "vocab" / "src.model").read_bytes() == vocab
    api.train(api.run_config(run, {"data": shards_setting(sharded_data[:2]), "train": {"max_steps": 2}}), run)


def test_a_run_stopped_part_way_through_the_second_shard_resumes_to_the_same_parameters(sharded_data, tiny_config,
                                                                                         tmp_path):
    common = ["train.valid_every=100", "model.dropout=0.3", "train.seed=5"]
    first = ParallelData.open(sharded_data[0], "train")
    first_epoch = len(epoch_batches(first.src.lengths, first.tgt.lengths, 400, 5, 1))
    stop, end = first_epoch + 3, first_epoch + 6
    data = shards_setting(sharded_data)
    api.train(tiny_config(data, *common, f"train.max_steps={end}"), tmp_path / "straight")
    api.train(tiny_config(data, *common, f"train.max_steps={stop}"), tmp_path / "resumed")
    stopped = load_checkpoint(step_checkpoints(tmp_path / "resumed" / "checkpoints")[-1])["progress"]
    assert (stopped["epoch"], stopped["position"], stopped["shard"]) == (2, 3, str(sharded_data[1]))
    api.train(api.run_config(tmp_path / "resumed", {"train": {"max_steps": end}}), tmp_path / "resumed")
    straight, resumed = (load_checkpoint(step_checkpoints(tmp_path / run / "checkpoints")[-1])
                         for run in ("straight", "resumed"))
    assert straight["progress"]["step"] == resumed["progress"]["step"] == end
    assert straight["valid"]["loss"] == resumed["valid"]["loss"]
    assert all(torch.equal(straight["model"][k], resumed["model"][k]) for k in straight["model"])


def test_loss_falls_over_the_shards_and_the_run_keeps_the_shared_vocabulary(sharded_data, train_tiny_on, tmp_path):
    losses = train_tiny_on(shards_setting(sharded_data), 60)
    run = tmp_path / "run"
    assert losses[-1] < losses[0]
    log = (run / "train.log").read_text(encoding="utf-8")
    assert all(f"shard {index} of 3" in log for index in (1, 2, 3))
    run_meta = DataMeta.load(run)
    assert vocab_digest(run, run_meta) == run_meta.vocab_sha256 == DataMeta.load(sharded_data[0]).vocab_sha256


def test_the_command_line_prepares_a_shard_and_trains_on_it_or_names_the_misfit(sharded_data, tmp_path, capsys):
    text = sharded_data[2] / "train"
    shard = tmp_path / "shard"
    prepare_args = ["prepare", "--train-src", f"{text}.src.txt", "--train-tgt", f"{text}.tgt.txt"]
    assert main([*prepare_args, "--vocab-from", str(sharded_data[0]), "--out", str(shard)]) == 0
    train_args = ["train", "--preset", "tiny", "--set", "train.max_steps=2", "--set", "train.progress=false",
                  "--set", "train.valid_bleu=false", "--set", "model.d_model=32", "--set", "model.ffn_dim=64"]
    assert main([*train_args, "--data", shards_setting([sharded_data[0], shard]), "--out", str(tmp_path / "run")]) == 0
    assert main([*prepare_args, "--vocab-size", "150", "--out", str(tmp_path / "own")]) == 0
    capsys.readouterr()
    assert main([*train_args, "--data", shards_setting([sharded_data[0], tmp_path / "own"]),
                 "--out", str(tmp_path / "refused")]) == 2
    assert f"{tmp_path / 'own'}: its vocabulary differs" in capsys.readouterr().err
