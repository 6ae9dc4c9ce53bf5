"""Extension points: methods fill slots, declare named losses; the baseline never imports a method."""

import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from ordo.build import build_model
from ordo.config import load_config
from ordo.data.batch import Batch
from ordo.errors import ConfigError
from ordo.losses import AuxLoss
from ordo.methods import METHODS, Method
from ordo.models.attention import RelationSelfAttention
from ordo.models.transformer import TransformerEncoderLayer


@dataclass
class ToyConfig:
    weight: float = 0.5  # weight of the toy loss
    clip: int = 2  # relative distance clip of the toy relations


class NormRecordingLayer(TransformerEncoderLayer):
    """Leaves the mean squared output in ``ctx.extras`` (a toy named output)."""

    def forward(self, x, ctx):
        x = super().forward(x, ctx)
        ctx.extras["toy_norm"] = x.pow(2).mean(-1)
        return x


class RelativeIds:
    def __init__(self, clip):
        self.clip = clip

    def __call__(self, batch):
        positions = torch.arange(batch.src_tokens.size(1))
        return ((positions[None, :] - positions[:, None]).clamp(-self.clip, self.clip) + self.clip).unsqueeze(0)


def toy_apply(slots, cfg):
    slots.claim("encoder_layer", "toy", lambda i: NormRecordingLayer(**slots.encoder_layer_parts(i)))


def toy_relations_apply(slots, cfg):
    def attention(side, index):
        if side == "encoder":
            return RelationSelfAttention(slots.cfg.d_model, slots.cfg.heads, 2 * cfg.clip + 1, RelativeIds(cfg.clip))
        return slots.default_self_attention(side, index)

    slots.claim("self_attention", "toy_rel", attention)


def toy_conflict_apply(slots, cfg):
    slots.claim("encoder_layer", "toy_conflict", slots.default_encoder_layer)


@pytest.fixture
def toy_methods(monkeypatch):
    loss = lambda cfg: [AuxLoss("toy_norm", cfg.weight, lambda out, batch: out.extras["toy_norm"].mean())]
    monkeypatch.setitem(METHODS, "toy", Method("toy", ToyConfig, toy_apply, loss, fields=("toy_field",)))
    monkeypatch.setitem(METHODS, "toy_rel", Method("toy_rel", ToyConfig, toy_relations_apply))
    monkeypatch.setitem(METHODS, "toy_conflict", Method("toy_conflict", ToyConfig, toy_conflict_apply))


def batch():
    src = torch.randint(4, 30, (2, 5))
    return Batch(src, torch.tensor([5, 5]), torch.arange(2), src[:, :4], src[:, :4])


def test_method_switched_on_by_set_fills_slot_and_declares_loss(toy_methods):
    cfg = load_config(None, ["model.preset=tiny", "model.methods.toy.weight=0.25"]).model
    built = build_model(cfg, 30, 30)
    assert [(loss.name, loss.weight) for loss in built.losses] == [("toy_norm", 0.25)]
    assert built.fields == ("toy_field",)
    out = built.model(batch())
    assert out.extras["toy_norm"].shape == (2, 5)


def test_relation_attention_reads_its_ids_through_the_encoder_context(toy_methods):
    cfg = load_config(None, ["model.preset=tiny", "model.methods.toy_rel.clip=1"]).model
    model = build_model(cfg, 30, 30).model
    assert all(isinstance(layer.self_attn, RelationSelfAttention) for layer in model.encoder.layers)
    out = model(batch())
    out.logits.sum().backward()
    assert model.encoder.layers[0].self_attn.rel_keys.weight.grad.abs().sum() > 0


def test_two_methods_claiming_one_slot_is_an_error(toy_methods):
    cfg = load_config(None, ["model.preset=tiny", "model.methods.toy.weight=1", "model.methods.toy_conflict.clip=1"])
    with pytest.raises(ConfigError, match="both replace the encoder_layer"):
        build_model(cfg.model, 30, 30)


def test_unknown_method_and_unknown_option(toy_methods):
    with pytest.raises(ConfigError, match="model.methods.nope: unknown method"):
        build_model(load_config(None, ["model.methods.nope.x=1"]).model, 30, 30)
    with pytest.raises(ConfigError, match=r"model.methods.toy.wieght: unknown key \(did you mean weight\?\)"):
        build_model(load_config(None, ["model.methods.toy.wieght=1"]).model, 30, 30)


def test_share_all_needs_joint_vocab():
    with pytest.raises(ConfigError, match="joint vocabulary"):
        build_model(load_config(None, ["model.preset=tiny"]).model, 30, 40, joint_vocab=False)


def test_method_layers_and_models_override_hooks_not_the_baseline_forward():
    """A method changes a step of a baseline layer or model through a hook; the forward exists once."""
    import ordo.methods  # noqa: F401  (every method module)
    from ordo.models.transformer import TransformerDecoderLayer, TransformerModel

    def subclasses(cls):
        return [cls, *(sub for direct in cls.__subclasses__() for sub in subclasses(direct))]

    bases = (TransformerEncoderLayer, TransformerDecoderLayer, TransformerModel)
    method_classes = [cls for base in bases for cls in subclasses(base) if cls.__module__.startswith("ordo.methods")]
    assert {cls.__name__ for cls in method_classes} >= {"ReorderingEncoderLayer", "ReorderingDecoderLayer",
                                                       "FutureCostModel"}
    for cls in method_classes:
        assert not {"forward", "sublayers", "decode_step"} & set(vars(cls)), cls


def test_baseline_imports_no_method_module():
    code = (
        "import sys, ordo.models.transformer, ordo.models.rnn, ordo.models.slots, ordo.training.trainer, "
        "ordo.decoding.search, ordo.decoding.translator\n"
        "loaded = [m for m in sys.modules if m.startswith('ordo.methods')]\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
