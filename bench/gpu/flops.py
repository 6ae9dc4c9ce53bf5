"""Model FLOPs of training a Transformer, per target token, for model FLOP utilisation (MFU).

Counted as in the PaLM paper's appendix B (Chowdhery et al. 2022): 6 FLOPs per matmul weight per token it
multiplies (forward 2, backward 4), plus 12 · layers · d_model · length for the attention scores and values,
fwd+bwd. The encoder's weights and attention run once per source token, the decoder's and the output layer's
once per target token; lengths are the training set's mean sentence lengths, so the padding a batch carries
is not counted as useful work. The embedding lookups are not products; the output layer, tied to them or not,
is.

usage: python bench/gpu/flops.py CONFIG --data DIR [--set KEY=VALUE ...]   (prints FLOPs per target token)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ordo import api
from ordo.config import ExperimentConfig, load_config
from ordo.data.corpus import DataMeta, ParallelData

RATED_BF16_TFLOPS = 989.4  # H100 SXM and H200, dense bf16 (NVIDIA's data sheets)


def matmul_weights(module: nn.Module) -> int:
    """Weights of the linear layers inside ``module`` (biases are additions, not products)."""
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def flops_per_target_token(model: nn.Module, cfg: ExperimentConfig, meta: DataMeta, data_dir: Path) -> float:
    """Training FLOPs per target token of the Transformer ``model`` on the training set of ``data_dir``."""
    train = ParallelData.open(data_dir, "train")
    src_len = float(np.mean(train.src.lengths))
    tgt_len = float(np.mean(train.tgt.lengths))
    parts = dict(model.named_children())
    encoder = matmul_weights(parts["encoder"])
    output_weight: torch.Tensor = parts["output"].weight  # type: ignore[assignment]
    decoder = matmul_weights(parts["decoder"]) + output_weight.numel()
    d_model, enc_layers, dec_layers = cfg.model.d_model, cfg.model.encoder_layers, cfg.model.decoder_layers
    per_source = 6 * encoder + 12 * enc_layers * d_model * src_len
    per_target = 6 * decoder + 12 * dec_layers * d_model * (tgt_len + src_len)  # self- and cross-attention
    return per_target + per_source * src_len / tgt_len


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    cfg = load_config(args.config, [*args.sets, f"data={args.data}"])
    meta = DataMeta.load(args.data)
    model = api.build_for_data(cfg, meta).model
    print(f"{flops_per_target_token(model, cfg, meta, args.data):.0f}")


if __name__ == "__main__":
    main()
