"""Forced-decoding scores (ordo.decoding.scoring): a hand-computed case, a model's (and an ensemble's) own
hypotheses scored as the search scored them, and batching that leaves the scores alone (small random-weight
models)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from ordo.build import build_model
from ordo.config import DecodeConfig, load_config
from ordo.data.batch import EOS_ID, PAD_ID
from ordo.data.batching import collate
from ordo.decoding.ensemble import Ensemble
from ordo.decoding.scoring import score_rows, target_log_probs
from ordo.decoding.translator import translate_rows
from ordo.models.outputs import Seq2SeqOutput

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

VOCAB = 14


def random_model(preset: str, seed: int) -> nn.Module:
    """A model of ``preset`` with random weights (seed ``seed``), in eval mode."""
    cfg = load_config(None, [f"model.preset={preset}", "model.dropout=0"]).model
    torch.manual_seed(seed)
    return build_model(cfg, VOCAB, VOCAB).model.eval()


def random_rows(lengths: list[int], seed: int) -> list[np.ndarray]:
    """Token rows (no EOS) of the given lengths."""
    rng = np.random.default_rng(seed)
    return [rng.integers(4, VOCAB, size=length).astype(np.int64) for length in lengths]


def test_a_hand_computed_case_sums_each_rows_real_targets_only():
    """Logits z_t = (0, ..., 0, 2 at id 5): log p(5) = 2 - log(V - 1 + e^2), any other id -log(V - 1 + e^2);
    padded positions add nothing."""
    project = nn.Linear(1, 8, bias=True)
    with torch.no_grad():
        project.weight.zero_()
        project.bias.zero_()
        project.bias[5] = 2.0
    hidden = torch.zeros(2, 3, 1)  # (B, T, D)
    tgt_out = torch.tensor([[5, 6, EOS_ID], [5, EOS_ID, PAD_ID]])
    log_z = math.log(7 + math.exp(2))
    sums = target_log_probs(Seq2SeqOutput(hidden, project), tgt_out)
    torch.testing.assert_close(sums, torch.tensor([2 - 3 * log_z, 2 - 2 * log_z]))


def favour_eos(model: nn.Module, shift: float) -> None:
    """Add ``shift`` to the EOS logit of every output-layer call (search steps and forced passes alike), so that
    some hypotheses of a random model end on their own and others at the length limit."""
    project = model(collate(np.arange(1), random_rows([3], 0), random_rows([3], 1))).project
    eos_shift = torch.zeros(VOCAB)
    eos_shift[EOS_ID] = shift
    project.register_forward_hook(lambda _module, _args, logits: logits + eos_shift.to(logits.dtype))


def eos_favouring_model(presets: tuple[str, ...], shifts: tuple[float, ...]) -> nn.Module:
    """A random model of each preset (seed 3) whose EOS logit is raised by its shift (:func:`favour_eos`); two or
    more are searched as one (:class:`Ensemble`)."""
    members = [random_model(preset, seed=3) for preset in presets]
    for member, shift in zip(members, shifts):
        favour_eos(member, shift)
    return members[0] if len(members) == 1 else Ensemble(members).eval()


@pytest.mark.parametrize(("presets", "shifts"), [
    (("tiny",), (2.0,)), (("rnn-tiny",), (0.1,)), (("tiny", "rnn-tiny"), (0.5, 0.1)),
])
def test_a_models_own_hypotheses_score_their_search_log_probability(presets, shifts):
    """Beam search's log_prob of a hypothesis (its pieces and EOS, the EOS forced at the length limit too) is what
    forced decoding of those pieces gives, for every n-best entry: the teacher-forced pass and the cached steps
    of the search agree. For an ensemble: the mean of its members' probabilities per token, in both."""
    model = eos_favouring_model(presets, shifts)
    src_rows = random_rows([6, 2, 9, 4], seed=1)
    decode = DecodeConfig(beam_size=4, nbest=4, max_len_a=2.0, max_len_b=6)
    hyps = translate_rows(model, src_rows, decode)
    pairs = [(row, np.asarray(h.tokens, dtype=np.int64), h) for row, hs in zip(src_rows, hyps) for h in hs]
    limits = {id(row): int(2.0 * (len(row) + 1) + 6) for row in src_rows}
    at_limit = [len(tgt) == limits[id(src)] for src, tgt, _ in pairs]
    assert any(at_limit) and not all(at_limit)  # both ways of ending
    scores = score_rows(model, [src for src, _, _ in pairs], [tgt for _, tgt, _ in pairs], decode)
    assert [s.log_prob for s in scores] == pytest.approx([h.log_prob for _, _, h in pairs], abs=1e-4)
    assert [s.tokens for s in scores] == [len(tgt) + 1 for _, tgt, _ in pairs]


def test_batching_leaves_each_pairs_score_alone():
    """All pairs in one padded batch, or each on its own, give the same scores, in input order."""
    model = random_model("tiny", seed=4)
    src_rows, tgt_rows = random_rows([7, 1, 12, 3, 5], seed=2), random_rows([2, 9, 4, 0, 6], seed=3)
    decode = DecodeConfig()
    together = score_rows(model, src_rows, tgt_rows, decode)
    alone = [score_rows(model, [src], [tgt], decode)[0] for src, tgt in zip(src_rows, tgt_rows)]
    assert [s.log_prob for s in together] == pytest.approx([s.log_prob for s in alone], abs=1e-4)
    assert together[3].tokens == 1 and together[3].log_prob < 0  # an empty target is EOS alone
    assert all(s.per_token == pytest.approx(s.log_prob / s.tokens) for s in together)


def test_an_ensemble_scores_the_log_of_its_members_mean_probability():
    """Per token log((p_1 + p_2) / 2), which is at least (log p_1 + log p_2) / 2 (the arithmetic mean is at least
    the geometric one) and equals log p when both members are one model."""
    first, second = random_model("tiny", seed=6), random_model("tiny", seed=7)
    src_rows, tgt_rows = random_rows([5, 8, 3], seed=4), random_rows([4, 1, 7], seed=5)
    decode = DecodeConfig()
    one, two = score_rows(first, src_rows, tgt_rows, decode), score_rows(second, src_rows, tgt_rows, decode)
    both = score_rows(Ensemble([first, second]).eval(), src_rows, tgt_rows, decode)
    for a, b, mean in zip(one, two, both):
        assert mean.log_prob >= (a.log_prob + b.log_prob) / 2 - 1e-4 and mean.tokens == a.tokens
        assert mean.log_prob != pytest.approx(a.log_prob, abs=1e-3)
    single = score_rows(Ensemble([first, first]).eval(), src_rows, tgt_rows, decode)
    assert [s.log_prob for s in single] == pytest.approx([s.log_prob for s in one], abs=1e-4)
