"""Checkpoint files: durable atomic saves, a failed save as a one-line error, killed saves' temporary files."""

import errno
import os

import pytest
import torch

from ordo.checkpoint import load_checkpoint, save_checkpoint, step_checkpoints
from ordo.errors import CheckpointError
from ordo.training.checkpoint import prune_checkpoints, remove_stale_temporaries


def test_save_flushes_the_file_before_the_rename_and_the_folder_after(tmp_path, fsync_events):
    save_checkpoint({"model": {"w": torch.ones(3)}}, tmp_path / "step_1.pt")
    assert fsync_events == ["fsync file", "replace", "fsync dir"]
    assert torch.equal(load_checkpoint(tmp_path / "step_1.pt")["model"]["w"], torch.ones(3))


def test_a_full_disk_is_an_error_naming_the_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    save_checkpoint({"model": {"w": torch.zeros(2)}}, tmp_path / "step_1.pt")

    def full_disk(state, handle):
        handle.write(b"part of a checkpoint")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(CheckpointError, match=r"step_1.pt: cannot save checkpoint \(No space left on device\)"):
        save_checkpoint({"model": {"w": torch.ones(2)}}, tmp_path / "step_1.pt")
    assert os.listdir(tmp_path) == ["step_1.pt"]
    assert torch.equal(load_checkpoint(tmp_path / "step_1.pt")["model"]["w"], torch.zeros(2))


def test_only_the_temporary_files_of_checkpoint_saves_are_removed(tmp_path):
    ours = [".step_12.pt.a1_b2c3.tmp", ".best.pt.x9y8z7w6.tmp"]
    others = ["step_12.pt", ".averaged.pt.abc123.tmp", ".config.yaml.abc123.tmp", "notes.tmp"]
    for name in ours + others:
        (tmp_path / name).write_bytes(b"x")
    assert sorted(p.name for p in remove_stale_temporaries(tmp_path)) == sorted(ours)
    assert sorted(os.listdir(tmp_path)) == sorted(others)


def test_a_checkpoint_saved_off_the_validation_grid_goes_once_a_later_one_exists(tmp_path):
    for step in (100, 200, 250, 300, 400, 437):  # 250: a SIGTERM; 437: the end of the run
        (tmp_path / f"step_{step}.pt").write_bytes(b"x")
    prune_checkpoints(tmp_path, keep_last=4, off_grid=[tmp_path / "step_250.pt", tmp_path / "step_437.pt"])
    assert [p.name for p in step_checkpoints(tmp_path)] == ["step_200.pt", "step_300.pt", "step_400.pt", "step_437.pt"]
    prune_checkpoints(tmp_path, keep_last=5)
    assert len(step_checkpoints(tmp_path)) == 4


def _step_checkpoints(folder, values):
    """``step_N.pt`` files in ``folder`` whose one weight ``w`` holds ``values[N - 1]``."""
    for step, value in enumerate(values, 1):
        save_checkpoint({"model": {"w": torch.full((2,), float(value))}}, folder / f"step_{step}.pt")


@pytest.mark.parametrize("last", [0, -1])
def test_averaging_fewer_than_one_checkpoint_is_refused(tmp_path, last):
    from ordo import api
    from ordo.errors import ConfigError

    _step_checkpoints(tmp_path / "checkpoints", [1.0, 2.0, 6.0])
    with pytest.raises(ConfigError, match=f"last: {last} is below its minimum 1"):
        api.average(tmp_path, last)
    assert not (tmp_path / "checkpoints" / "averaged.pt").exists()
    assert torch.equal(load_checkpoint(api.average(tmp_path, 2))["model"]["w"], torch.full((2,), 4.0))


def test_averaging_a_run_without_checkpoints_names_its_folder(tmp_path):
    from ordo import api

    with pytest.raises(CheckpointError, match=r"nothing/checkpoints: no step_N.pt checkpoints to average"):
        api.average(tmp_path / "nothing")


def test_weights_of_another_model_are_named_with_the_file_and_the_first_differences(tmp_path):
    from ordo.api import load_weights

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    other = torch.nn.Sequential(torch.nn.Linear(4, 5)).state_dict()
    path, config = tmp_path / "step_1.pt", tmp_path / "config.yaml"
    with pytest.raises(CheckpointError) as caught:
        load_weights(model, other, path, config)
    message = str(caught.value)
    assert message.startswith(f"{path}: does not match the model of {config} (")
    assert "1.weight missing" in message and "0.weight (5, 4) in the checkpoint, (3, 4) in the model" in message
    assert "\n" not in message and "and 1 more" in message
    load_weights(model, model.state_dict(), path, config)


def _mapped_from(path) -> list[tuple[int, int]]:
    """The address ranges of this process's mappings of ``path`` (``/proc/self/maps``)."""
    ranges = []
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() == str(path):
                start, end = (int(address, 16) for address in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def test_a_mapped_load_leaves_the_tensors_in_the_file_until_they_are_read(tmp_path):
    """Translation loads a checkpoint mapped: the optimizer's state (twice the weights under Adam) stays in the
    file, where a plain load copied all of it into memory."""
    path = tmp_path / "step_1.pt"
    save_checkpoint({"model": {"w": torch.arange(4.0)}, "optimizer": {"m": torch.full((1000,), 2.0)}}, path)
    state = load_checkpoint(path, mmap=True)
    address = state["optimizer"]["m"].data_ptr()
    assert any(start <= address < end for start, end in _mapped_from(path.resolve()))
    assert torch.equal(state["model"]["w"], torch.arange(4.0))
    plain = load_checkpoint(path)["optimizer"]["m"].data_ptr()
    assert not any(start <= plain < end for start, end in _mapped_from(path.resolve()))


def test_a_truncated_checkpoint_loaded_mapped_is_named(tmp_path):
    path = tmp_path / "step_1.pt"
    save_checkpoint({"model": {"w": torch.arange(4.0)}}, path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="step_1.pt: cannot read checkpoint"):
        load_checkpoint(path, mmap=True)


def test_a_loaded_run_and_averaging_map_their_checkpoints(trained_run, tmp_path, monkeypatch):
    """``api.load_run`` (translate, serve) and averaging read only the weights of a checkpoint."""
    import ordo.checkpoint
    from ordo import api

    calls = []
    real_load = torch.load
    monkeypatch.setattr(ordo.checkpoint.torch, "load", lambda *a, **k: calls.append(k.get("mmap")) or real_load(*a, **k))
    api.load_run(trained_run, "last")
    assert calls == [True]
    paths = []
    for step in (1, 2):
        paths.append(tmp_path / f"step_{step}.pt")
        save_checkpoint({"model": {"w": torch.full((3,), float(step))}, "optimizer": {}}, paths[-1])
    assert torch.equal(ordo.checkpoint.average_checkpoints(paths)["w"], torch.full((3,), 1.5))
    assert calls == [True, True, True]
