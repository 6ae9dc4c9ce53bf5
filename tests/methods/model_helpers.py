"""Tiny models and toy batches shared by the method tests."""

import torch

from ordo.build import build_model
from ordo.config import load_config
from ordo.data.batch import Batch


def tiny(*overrides: str, vocab: int = 40, seed: int = 0, preset: str = "tiny") -> torch.nn.Module:
    """A seeded model of ``preset`` without dropout, with ``--set`` style ``overrides``."""
    cfg = load_config(None, [f"model.preset={preset}", "model.dropout=0", *overrides]).model
    torch.manual_seed(seed)
    return build_model(cfg, vocab, vocab).model


def toy_batch(rows: int, src_len: int, tgt_len: int, short_row: int, short_len: int, seed: int, vocab: int = 40,
              fields: dict[str, torch.Tensor] | None = None) -> Batch:
    """Random tokens; row ``short_row`` has ``short_len`` source tokens (EOS included) and padding after."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (rows, src_len), generator=generator)
    src[short_row, short_len:] = 0
    tgt = torch.randint(4, vocab, (rows, tgt_len), generator=generator)
    lengths = torch.full((rows,), src_len)
    lengths[short_row] = short_len
    return Batch(src, lengths, torch.arange(rows), tgt, tgt.clone(), fields or {})
