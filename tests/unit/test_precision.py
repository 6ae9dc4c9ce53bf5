"""Mixed-precision settings (``train.amp``, ``decode.amp``): what each mode resolves to, per device."""

import pytest
import torch

from ordo.config import load_config
from ordo.errors import ConfigError
from ordo.precision import amp_dtype


def test_amp_modes_resolve_per_device_and_an_unknown_one_is_refused():
    assert amp_dtype("auto", torch.device("cpu")) is None
    assert amp_dtype("auto", torch.device("cuda")) is torch.bfloat16
    assert amp_dtype("fp16", torch.device("cpu")) is torch.float16
    assert amp_dtype("off", torch.device("cuda")) is None
    with pytest.raises(ConfigError, match="train.amp: 'bf32' is not one of auto, bf16, fp16, off"):
        load_config(None, ["train.amp=bf32"])
    with pytest.raises(ConfigError, match="decode.amp: 'fp8' is not one of"):
        load_config(None, ["decode.amp=fp8"])
