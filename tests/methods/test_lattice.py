"""LPE and LSA (paper 002 §3, Eq. 4-5): relation table, positions, the 1-best case, gradients, training,
translation of raw text, and over-long input."""

from __future__ import annotations

import dataclasses
import itertools
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo import api
from ordo.cli import main
from ordo.config import DecodeConfig, load_config
from ordo.data.batching import collate
from ordo.data.corpus import ParallelData
from ordo.data.lattice.graph import FIELD_END, FIELD_START, Lattice, build_lattice
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.synthetic import write_corpus
from ordo.data.textio import read_lines
from ordo.decoding.ensemble import Ensemble
from ordo.decoding.scoring import score_rows
from ordo.decoding.search import beam_search
from ordo.decoding.translator import translate_rows
from ordo.errors import ConfigError
from ordo.export import check_exportable
from ordo.methods.lattice_attn import RELATIONS, batch_relations
from ordo.methods.lattice_pe import LatticeSourcePositions, lattice_positions
from ordo.models.attention import RelationSelfAttention, SelfAttention
from ordo.models.embeddings import SequentialSourcePositions, SinusoidalPositions

LATTICE_TRAIN = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "model.share_embeddings=decoder",
                 "train.max_tokens=600", "train.warmup_steps=20", "train.lr=3e-3", "train.progress=false",
                 "train.valid_bleu=false", "train.threads=2"]

# a:(0,1) ab:(0,2) b:(1,2) bc:(1,3) c:(2,3) d:(3,4), then EOS:(4,5); r(row, column), from paper 002 Table 1
HAND_TABLE = [
    ["self", "ind", "lad", "lad", "pre", "pre", "pre"],
    ["inc", "self", "inc", "its", "lad", "pre", "pre"],
    ["rad", "ind", "self", "ind", "lad", "pre", "pre"],
    ["rad", "its", "inc", "self", "inc", "lad", "pre"],
    ["suc", "rad", "rad", "ind", "self", "lad", "pre"],
    ["suc", "suc", "suc", "rad", "rad", "self", "lad"],
    ["suc", "suc", "suc", "suc", "suc", "rad", "self"],
]


def lattice_batch(lattices: list[Lattice], ids: list[list[int]] | None = None) -> object:
    """Collate lattices (edge ids default to 4, 5, ...) with their span fields, as training does."""
    rows = [np.asarray(ids[n] if ids else range(4, 4 + len(lat)), dtype=np.int64) for n, lat in enumerate(lattices)]
    fields = {FIELD_START: [np.asarray(lat.starts) for lat in lattices],
              FIELD_END: [np.asarray(lat.ends) for lat in lattices]}
    return collate(np.arange(len(lattices)), rows, [np.array([4, 5, 6])] * len(lattices), fields)


def hand_lattice() -> Lattice:
    return build_lattice([["a", "b", "c", "d"], ["ab", "c", "d"], ["a", "bc", "d"]])


def random_lattice(rng: random.Random) -> Lattice:
    """A lattice of 2-4 random segmentations of one random string."""
    text = "".join(rng.choice("xyz") for _ in range(rng.randint(1, 12)))
    segmentations = []
    for _ in range(rng.randint(2, 4)):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, len(text) - 1))) if len(text) > 1 else []
        bounds = [0, *cuts, len(text)]
        segmentations.append([text[a:b] for a, b in itertools.pairwise(bounds)])
    return build_lattice(segmentations)


def test_relations_of_a_hand_built_lattice_match_the_hand_written_table():
    lattice = hand_lattice()
    assert list(zip(lattice.starts, lattice.ends)) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4)]
    short = build_lattice([["a", "b"]])
    relations = batch_relations(lattice_batch([lattice, short]))  # (2, 7, 7)
    assert [[RELATIONS[r] for r in row] for row in relations[0].tolist()] == HAND_TABLE
    assert {name for row in HAND_TABLE for name in row} == set(RELATIONS)
    # the shorter sentence: a:(0,1) b:(1,2) EOS:(2,3); padding rows/columns are masked and not checked
    assert [[RELATIONS[r] for r in row[:3]] for row in relations[1, :3].tolist()] == [
        ["self", "lad", "pre"], ["rad", "self", "lad"], ["suc", "rad", "self"]]


def all_paths(lattice: Lattice, node: int = 0) -> list[list[int]]:
    """Every path of edge indices from ``node`` to the last node."""
    if node == lattice.num_nodes - 1:
        return [[]]
    leaving = [index for index, start in enumerate(lattice.starts) if start == node]
    return [[edge, *rest] for edge in leaving for rest in all_paths(lattice, lattice.ends[edge])]


def test_lattice_positions_never_decrease_along_any_path():
    rng = random.Random(7)
    lattices = [random_lattice(rng) for _ in range(30)]
    positions = lattice_positions(lattice_batch(lattices)).tolist()  # (B, S)
    assert sum(len(all_paths(lattice)) for lattice in lattices) > 3 * len(lattices)  # the lattices branch
    for row, lattice in enumerate(lattices):
        assert positions[row][: len(lattice)] == [start + 1 for start in lattice.starts]
        eos = len(lattice)
        for path in all_paths(lattice):
            along = [positions[row][edge] for edge in [*path, eos]]
            assert along == sorted(along) and len(set(along)) == len(along), (lattice, path)


def test_one_segmentation_gives_the_baseline_positions_and_outputs():
    pieces = [["▁a", "▁big", "▁do", "g", "."], ["▁the", "▁cat"]]
    lattices = [build_lattice([tokens]) for tokens in pieces]
    batch = lattice_batch(lattices, ids=[[5, 6, 7, 8, 9], [10, 11]])
    table = SinusoidalPositions(64, 16)
    lattice_pe, baseline = LatticeSourcePositions(table)(batch), SequentialSourcePositions(table)(batch)
    for row, tokens in enumerate(pieces):
        real = len(tokens) + 1  # the pieces and EOS
        assert torch.equal(lattice_pe[row, :real], baseline[0, :real])
    batch.tgt_in = batch.tgt_out = torch.tensor([[2, 5, 6], [2, 7, 8]])
    with_lpe, plain = tiny("model.methods.lattice_pe={}").eval(), tiny().eval()  # same seed: same weights
    mask = batch.tgt_out.ne(0)
    assert torch.allclose(with_lpe(batch).logits[mask], plain(batch).logits[mask], atol=1e-6)


def test_methods_fill_their_slots_and_combine():
    both = tiny("model.methods.lattice_pe={}", "model.methods.lattice_attn={}")
    assert isinstance(both.encoder.positions, LatticeSourcePositions)
    assert all(layer.self_attn.relations_of is batch_relations for layer in both.encoder.layers)
    assert all(isinstance(layer.self_attn, RelationSelfAttention) and layer.self_attn.num_relations == 8
               for layer in both.encoder.layers)
    assert all(type(layer.self_attn) is SelfAttention for layer in both.decoder.layers)
    assert isinstance(tiny("model.methods.lattice_attn={}").encoder.positions, SequentialSourcePositions)
    with pytest.raises(ConfigError, match="lattice_attn and relative_pe|relative_pe and lattice_attn"):
        tiny("model.methods.lattice_attn={}", "model.methods.relative_pe.clip=2")


def test_gradients_reach_every_layers_relation_tables():
    model = tiny("model.methods.lattice_attn={}", "model.methods.lattice_pe={}")
    batch = lattice_batch([hand_lattice(), build_lattice([["a", "b"]])])
    batch.tgt_in = batch.tgt_out = torch.tensor([[2, 5, 6], [2, 7, 8]])
    model(batch).logits.logsumexp(-1).sum().backward()
    for layer in model.encoder.layers:
        assert layer.self_attn.rel_keys.weight.grad.abs().sum() > 0
        assert layer.self_attn.rel_values.weight.grad.abs().sum() > 0


def test_a_batch_without_spans_is_a_clear_error():
    with pytest.raises(ValueError, match="lattice_start and lattice_end.*lattice section"):
        tiny("model.methods.lattice_pe={}")(toy_batch(2, 5, 4, 1, 3, 0))


def test_a_lattice_model_ensembled_with_itself_searches_as_the_model():
    """Ensemble decoding of lattice runs (``ordo translate --model A --model B``): each member's encoder output of
    the lattice batch (states and relation masks) follows the hypotheses as sentences leave the beam."""
    model = tiny("model.methods.lattice_pe={}", "model.methods.lattice_attn={}").eval()
    rng = random.Random(5)
    lattices = [random_lattice(rng) for _ in range(5)]
    batch = lattice_batch(lattices, ids=[[4 + (edge * 7 + row) % 36 for edge in range(len(lattice))]
                                         for row, lattice in enumerate(lattices)])
    search = {"beam_size": 4, "nbest": 4, "max_len_a": 0.5, "max_len_b": 2}
    single = beam_search(model, batch, **search)
    assert len({max(len(h.tokens) for h in hyps) for hyps in single}) > 1  # sentences end at different steps
    together = beam_search(Ensemble([model, model]).eval(), batch, **search)
    assert [[h.tokens for h in hyps] for hyps in together] == [[h.tokens for h in hyps] for hyps in single]
    for got, wanted in zip(together, single):
        assert [h.score for h in got] == pytest.approx([h.score for h in wanted], abs=1e-4)


def test_a_lattice_models_own_hypotheses_score_their_search_log_probability():
    """Forced decoding over lattice rows and their span fields (``ordo score`` of a lattice run) gives each
    hypothesis the log_prob beam search gave it."""
    model = tiny("model.methods.lattice_pe={}", "model.methods.lattice_attn={}").eval()
    lattices = [random_lattice(random.Random(seed)) for seed in range(4)]
    src_rows = [np.asarray([4 + (edge * 5 + row) % 36 for edge in range(len(lattice))], dtype=np.int64)
                for row, lattice in enumerate(lattices)]
    fields = {FIELD_START: [np.asarray(lattice.starts) for lattice in lattices],
              FIELD_END: [np.asarray(lattice.ends) for lattice in lattices]}
    decode = DecodeConfig(beam_size=3, nbest=3, max_len_a=0.5, max_len_b=3)
    hyps = translate_rows(model, src_rows, decode, field_rows=fields)
    index = [row for row, found in enumerate(hyps) for _ in found]
    scores = score_rows(model, [src_rows[i] for i in index], [np.asarray(h.tokens, dtype=np.int64)
                                                               for found in hyps for h in found],
                        decode, field_rows={name: [rows[i] for i in index] for name, rows in fields.items()})
    assert [s.log_prob for s in scores] == pytest.approx([h.log_prob for found in hyps for h in found], abs=1e-4)


@pytest.fixture(scope="module")
def lattice_data(tmp_path_factory) -> Path:
    """The synthetic SVO->SOV corpus (1,500 pairs) with source lattices of three SentencePiece models."""
    root = tmp_path_factory.mktemp("lattice")
    splits = write_corpus(root / "text", {"train": 1500, "valid": 40}, seed=3)
    cfg = PrepareConfig(
        train_src=str(splits["train"][0]), train_tgt=str(splits["train"][1]),
        valid_src=str(splits["valid"][0]), valid_tgt=str(splits["valid"][1]),
        out=str(root / "data"), vocab_size=200,
    )
    cfg.lattice.segmenters = ["spm:80", "spm:140", "spm:200"]
    prepare(cfg, progress=False)
    return root / "data"


def train_lattice_run(data: Path, run: Path, steps: int, *overrides: str) -> list[float]:
    """Train a tiny model on ``data``; returns the validation losses of its checkpoints."""
    from ordo.checkpoint import load_checkpoint, step_checkpoints

    cfg = load_config(None, [f"data={data}", *LATTICE_TRAIN, f"train.max_steps={steps}",
                             f"train.valid_every={max(steps // 3, 1)}", "train.keep_last=3", *overrides])
    api.train(cfg, run)
    return [load_checkpoint(p)["valid"]["loss"] for p in step_checkpoints(run / "checkpoints")]


def test_lpe_and_lsa_train_on_a_tiny_lattice_task(lattice_data, tmp_path):
    losses = train_lattice_run(lattice_data, tmp_path / "run", 120, "model.methods.lattice_pe={}",
                               "model.methods.lattice_attn={}")
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < 3.5


def test_translate_builds_lattices_from_raw_text_with_the_runs_segmenters(lattice_data, tmp_path, capsys, caplog):
    data = tmp_path / "data"
    shutil.copytree(lattice_data, data)
    run = tmp_path / "run"
    train_lattice_run(data, run, 3, "model.methods.lattice_pe={}", "model.methods.lattice_attn={}")
    shutil.rmtree(data)  # the run translates raw text on its own
    loaded = api.load_run(run)
    without_methods = dataclasses.replace(loaded.cfg, model=dataclasses.replace(loaded.cfg.model, methods={}))
    with pytest.raises(ConfigError, match="reads lattices"):
        check_exportable(dataclasses.replace(loaded, cfg=without_methods))
    valid = ParallelData.open(lattice_data, "valid")
    texts = read_lines(lattice_data / "valid.src.txt")
    rows, fields = loaded.encode_inputs(texts)
    for index in range(len(texts)):
        assert rows[index].tolist() == valid.src[index].tolist()
        assert fields[FIELD_START][index].tolist() == valid.fields[FIELD_START][index].tolist()
        assert fields[FIELD_END][index].tolist() == valid.fields[FIELD_END][index].tolist()
    source = tmp_path / "in.txt"
    source.write_text(texts[0] + "\n" + " ".join([texts[1]] * (1024 // len(rows[1]) + 1)) + "\n", encoding="utf-8")
    output = tmp_path / "out.txt"
    flags = ["translate", "--model", str(run), "--input", str(source), "--output", str(output), "--beam", "2",
             "--max-len-a", "0", "--max-len-b", "5"]
    with caplog.at_level("WARNING"):
        assert main(flags) == 0  # cut to its first edges, as a plain over-long sentence is
    assert len(read_lines(output)) == 2 and f"{source}:2:" in caplog.text and "lattice edges, cut to" in caplog.text
    output.unlink()
    assert main([*flags, "--long-lines", "error"]) == 2
    assert not output.exists()
    err = capsys.readouterr().err
    assert f"{source}:2:" in err and "lattice edges, more than model.max_positions-1=1023" in err
    assert f"{source}:1:" not in err


def test_align_with_a_lattice_runs_attention_is_refused_by_name(lattice_data, tmp_path, capsys):
    run = tmp_path / "run"
    train_lattice_run(lattice_data, run, 2, "model.methods.lattice_pe={}")
    texts = tmp_path / "src.txt", tmp_path / "tgt.txt"
    for path, side in zip(texts, ("src", "tgt")):
        path.write_text("".join(line + "\n" for line in read_lines(lattice_data / f"valid.{side}.txt")[:3]))
    out = tmp_path / "o.align"
    assert main(["align", "--model", str(run), "--checkpoint", "last", "--src", str(texts[0]), "--tgt", str(texts[1]),
                 "--out", str(out)]) == 2
    assert f"{run}: a lattice run's attention" in capsys.readouterr().err
    assert not out.exists()


def test_sharing_all_embeddings_on_a_lattice_corpus_says_which_setting_works(lattice_data, tmp_path):
    with pytest.raises(ConfigError, match="set model.share_embeddings=decoder"):
        train_lattice_run(lattice_data, tmp_path / "run", 2, "model.share_embeddings=all")
