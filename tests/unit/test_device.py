"""``--device`` and ``train.device``: a device that is not one, or CUDA on a machine without it, is a one-line
error naming the setting rather than torch's traceback."""

import pytest
import torch

from ordo.device import resolve_device
from ordo.errors import ConfigError


@pytest.mark.parametrize("setting, message", [
    ("gpu", "device 'gpu': expected auto, cpu, cuda or cuda:N"),
    ("cuda", "device 'cuda': CUDA is not available here"),
    ("cuda:1", "device 'cuda:1': CUDA is not available here"),
])
def test_a_device_that_cannot_be_used_is_named(monkeypatch, setting, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=message):
        resolve_device(setting)


def test_auto_and_cpu_resolve_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == resolve_device("cpu") == torch.device("cpu")
