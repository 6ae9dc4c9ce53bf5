"""ordo.gemm: float32 linear layers on oneDNN give torch's results and gradients, and the setting resolves
per CPU."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from ordo import gemm
from ordo.config import load_config
from ordo.errors import ConfigError

needs_onednn = pytest.mark.skipif(not gemm.onednn_available(), reason="this torch has no oneDNN linear kernel")


@needs_onednn
@pytest.mark.parametrize("with_bias", [True, False])
def test_onednn_linear_matches_torch_forward_and_backward(with_bias, onednn_calls):
    torch.manual_seed(0)
    x = torch.randn(3, 7, 16, requires_grad=True)
    weight = torch.randn(24, 16, requires_grad=True)
    bias = torch.randn(24, requires_grad=True) if with_bias else None
    upstream = torch.randn(3, 7, 24)
    expected = F.linear(x, weight, bias)
    expected_grads = torch.autograd.grad(expected, [x, weight, *([bias] if with_bias else [])], upstream)
    with gemm.cpu_gemm("onednn"):
        y = gemm.linear(x, weight, bias)
    grads = torch.autograd.grad(y, [x, weight, *([bias] if with_bias else [])], upstream)
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    assert onednn_calls == [(32, 16), (32, 24), (24, 32)], \
        "the product and both gradient products on oneDNN, the 21 rows padded to 32 (few kernels in training)"


@needs_onednn
def test_onednn_takes_non_contiguous_inputs_and_matmul_is_a_product(onednn_calls):
    torch.manual_seed(1)
    x = torch.randn(16, 10).t()  # (10, 16), not contiguous
    weight = torch.randn(16, 5)[:, :4].t()  # (4, 16), not contiguous
    b = torch.randn(16, 6)
    with gemm.cpu_gemm("onednn"):
        torch.testing.assert_close(gemm.linear(x, weight), x @ weight.t(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(gemm.matmul(x, b), x @ b, rtol=1e-5, atol=1e-5)
    assert len(onednn_calls) == 2


@needs_onednn
def test_only_float32_cpu_products_outside_autocast_go_to_onednn(onednn_calls):
    x, weight = torch.randn(4, 8), torch.randn(6, 8)
    gemm.linear(x, weight)  # no context: torch's path
    with gemm.cpu_gemm("blas"):
        gemm.linear(x, weight)
    with gemm.cpu_gemm("onednn"):
        assert gemm.linear(x.bfloat16(), weight.bfloat16()).dtype == torch.bfloat16
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert gemm.linear(x, weight).dtype == torch.bfloat16, "autocast still casts"
        assert onednn_calls == []
        gemm.linear(x, weight)
    assert onednn_calls == [(4, 8)]
    gemm.linear(x, weight)
    assert len(onednn_calls) == 1, "the setting ends with its block"


ZEN4 = {"vendor_id": "AuthenticAMD", "flags": "fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16"}
ZEN3 = {"vendor_id": "AuthenticAMD", "flags": "fpu sse2 avx avx2 fma"}
XEON = {"vendor_id": "GenuineIntel", "flags": "fpu sse2 avx avx2 fma avx512f avx512bw amx_bf16"}


@pytest.mark.parametrize("machine, info, expected", [
    ("x86_64", ZEN4, "onednn"), ("x86_64", ZEN3, "blas"), ("x86_64", XEON, "blas"), ("x86_64", {}, "blas"),
    ("aarch64", {"flags": "fp asimd sve"}, "blas"),
])
def test_auto_picks_onednn_only_where_mkl_runs_avx2_code_on_an_avx512_cpu(monkeypatch, machine, info, expected):
    monkeypatch.setattr(gemm, "onednn_available", lambda: True)
    monkeypatch.setattr(gemm.platform, "machine", lambda: machine)
    monkeypatch.setattr(gemm, "cpuinfo", lambda: info)
    assert gemm.resolve("auto") == expected
    assert gemm.resolve("blas") == "blas" and gemm.resolve("onednn") == "onednn"
    with gemm.cpu_gemm("auto") as backend:
        assert backend == expected
    assert ("without AVX-512" in gemm.auto_reason()) == ("avx512f" not in info.get("flags", ""))


@needs_onednn
def test_autos_onednn_rule_keeps_narrow_weights_on_blas_where_onednn_asked_for_takes_every_one(monkeypatch,
                                                                                               onednn_calls):
    monkeypatch.setattr(gemm.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(gemm, "cpuinfo", lambda: ZEN4)
    x = torch.randn(5, 256, requires_grad=True)
    narrow, wide = torch.randn(128, 256, requires_grad=True), torch.randn(256, 256, requires_grad=True)
    with gemm.cpu_gemm("auto"):
        gemm.linear(x, narrow).sum().backward()  # a tiny model's FFN output (128 x 512) alike: BLAS
        assert onednn_calls == []
        gemm.linear(x, wide).sum().backward()
        assert len(onednn_calls) == 3, "the product and its two gradient products"
    with gemm.cpu_gemm("onednn"):
        gemm.linear(x, narrow)
    assert len(onednn_calls) == 4
    assert "layers narrower than 256 on BLAS" in gemm.auto_reason()


def test_auto_falls_back_to_blas_without_a_onednn_kernel(monkeypatch):
    monkeypatch.setattr(gemm, "onednn_available", lambda: False)
    monkeypatch.setattr(gemm.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(gemm, "cpuinfo", lambda: ZEN4)
    assert gemm.resolve("auto") == "blas"
    assert "no oneDNN" in gemm.auto_reason()
    with pytest.raises(ConfigError, match="cpu_gemm onednn: this torch has no oneDNN linear kernel"):
        gemm.resolve("onednn")


def test_cpu_gemm_settings_are_checked():
    assert load_config(None, ["train.cpu_gemm=blas", "decode.cpu_gemm=onednn"]).decode.cpu_gemm == "onednn"
    with pytest.raises(ConfigError, match="train.cpu_gemm: 'mkl' is not one of auto, onednn, blas"):
        load_config(None, ["train.cpu_gemm=mkl"])


@needs_onednn
def test_packed_weights_live_for_one_block_and_follow_an_optimizer_step():
    torch.manual_seed(2)
    layer = gemm.Linear(16, 40)
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.1, fused=True)  # bumps no version counter
    x = torch.randn(5, 16)
    for _ in range(2):
        with gemm.cpu_gemm("onednn"):
            with torch.no_grad():
                torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
                packed = gemm.packed_weight(layer.weight)
                with gemm.cpu_gemm("onednn"):
                    assert gemm.packed_weight(layer.weight) is packed, "packed once in the outermost block"
            layer(x).square().sum().backward()
        optimizer.step()


@needs_onednn
def test_a_frozen_weight_stays_packed_until_it_is_changed_in_place():
    torch.manual_seed(3)
    layer = gemm.Linear(16, 40).requires_grad_(False)
    x = torch.randn(5, 16)
    with gemm.cpu_gemm("onednn"):
        first = gemm.packed_weight(layer.weight)
    with gemm.cpu_gemm("onednn"):
        assert gemm.packed_weight(layer.weight) is first, "kept from one translation to the next"
    layer.weight.mul_(-2.0)
    with gemm.cpu_gemm("onednn"), torch.inference_mode():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_a_frozen_weights_packed_copy_goes_with_it():
    layer = gemm.Linear(16, 8).requires_grad_(False)
    key = id(layer.weight)
    with gemm.cpu_gemm("onednn"):
        gemm.packed_weight(layer.weight)
    assert key in gemm._packed_frozen
    del layer
    assert key not in gemm._packed_frozen, "no packed copy outlives its weight"


def linear_rows(monkeypatch) -> list[int]:
    """The row counts of the products F.linear runs for ordo.gemm, recorded as they happen."""
    rows: list[int] = []
    plain = F.linear

    def recording(x, weight, bias=None):
        rows.append(x.reshape(-1, x.size(-1)).size(0))
        return plain(x, weight, bias)

    monkeypatch.setattr(gemm.F, "linear", recording)
    return rows


def test_bf16_training_products_pad_their_rows_to_the_bucket_and_give_the_unpadded_results(monkeypatch):
    torch.manual_seed(2)
    x = torch.randn(3, 13, 16, requires_grad=True)  # 39 rows
    weight = torch.randn(24, 16, requires_grad=True)
    bias = torch.randn(24, requires_grad=True)
    upstream = torch.randn(3, 13, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = F.linear(x, weight, bias)
    expected_grads = torch.autograd.grad(expected, [x, weight, bias], upstream)
    rows = linear_rows(monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = gemm.linear(x, weight, bias)
    grads = torch.autograd.grad(y, [x, weight, bias], upstream)
    assert rows == [48] and y.shape == (3, 13, 24) and y.dtype == torch.bfloat16
    torch.testing.assert_close(y, expected)
    for got, want in zip(grads, expected_grads):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)


def test_bf16_training_products_keep_their_unpadded_input_for_the_backward_pass():
    torch.manual_seed(3)
    hidden = torch.randn(39, 16).bfloat16().requires_grad_()  # a bf16 activation (the FFN's hidden layer)
    weight, bias = torch.randn(24, 16, requires_grad=True), torch.randn(24, requires_grad=True)
    upstream = torch.randn(39, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = gemm.linear(hidden, weight, bias)
        padded = F.pad(hidden, (0, 0, 0, 9))
        expected = F.linear(padded, weight, bias)[:39]  # autocast's product of the padded rows
    kept = [tensor for tensor in y.grad_fn.saved_tensors if tensor.dim() == 2 and tensor.size(1) == 16]
    assert [tensor.size(0) for tensor in kept] == [39, 24]  # the input unpadded, the weight
    assert kept[0].data_ptr() == hidden.data_ptr() and kept[1] is weight  # the tensors themselves: no copies kept
    grads = torch.autograd.grad(y, [hidden, weight, bias], upstream.bfloat16())
    expected_grads = torch.autograd.grad(expected, [hidden, weight, bias], upstream.bfloat16())
    assert torch.equal(y, expected)
    for got, want in zip(grads, expected_grads):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_float32_rows_are_not_padded_and_bf16_rows_without_gradients_pad_as_inference_does(monkeypatch):
    torch.manual_seed(4)
    x, weight = torch.randn(39, 16, requires_grad=True), torch.randn(24, 16, requires_grad=True)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = F.linear(x, weight)  # autocast's product of the unpadded rows
    rows = linear_rows(monkeypatch)
    gemm.linear(x, weight)  # float32 training
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        translated = gemm.linear(x, weight)  # a bf16 validation's or translation's product
        beam = gemm.linear(x[:5], weight)  # a beam's few rows stay as they are
    with torch.autocast("cpu", dtype=torch.bfloat16):
        gemm.linear(torch.randn(2 * gemm.ROW_BUCKET, 16, requires_grad=True), weight)  # already a multiple
    assert rows == [39, gemm.inference_rows(39), 5, 2 * gemm.ROW_BUCKET] and gemm.inference_rows(39) == 48
    assert translated.shape == (39, 24) and beam.shape == (5, 24) and translated.dtype == torch.bfloat16
    assert torch.equal(translated, expected)


def test_training_rows_pad_to_a_few_counts_per_doubling():
    assert [gemm.bucketed_rows(n) for n in (1, 39, 128, 129, 300, 2049, 2769, 4097)] == [
        16, 48, 128, 256, 384, 2304, 2816, 4608]
    for low in (512, 1024, 2048, 4096):  # multiples of 128 up to 2,048 rows, then 8 counts per doubling
        rows = range(low + 1, 2 * low + 1)
        padded = [gemm.bucketed_rows(n) for n in rows]
        assert len(set(padded)) == min(low // gemm.ROW_BUCKET, 8)  # one kernel per count and layer
        assert all(count % gemm.ROW_BUCKET == 0 and 0 <= count - n < max(gemm.ROW_BUCKET, low // 8)
                   for count, n in zip(padded, rows))


@needs_onednn
def test_products_without_gradients_on_onednn_pad_their_rows_to_few_counts(onednn_calls):
    torch.manual_seed(5)
    weight, bias = torch.randn(24, 16), torch.randn(24)
    with gemm.cpu_gemm("onednn"), torch.no_grad():
        for rows in range(1, 101):  # a decoding batch's rows as its sentences finish
            x = torch.randn(2, rows, 16)
            torch.testing.assert_close(gemm.linear(x, weight, bias), F.linear(x, weight, bias), rtol=1e-5, atol=1e-5)
    rows_seen = {math.prod(shape[:-1]) for shape in onednn_calls}
    few = {2, 4, 6, 8, 10, 12, 14, 16}  # a beam's few rows stay as they are
    assert rows_seen == few | set(range(32, 209, 16)), "20 row counts for 100 (one kernel each)"
    padded = [gemm.inference_rows(n) for n in (1, 16, 17, 129, 200, 257, 300, 2769)]
    assert padded == [1, 16, 32, 144, 208, 288, 320, 2816], "at most 1/8 more rows above 128"


def test_a_timed_choice_leaves_the_rules_backend_only_for_one_faster_by_the_margin():
    margin = gemm.TIMING_MARGIN
    assert gemm.pick(1.0, 1.0 - margin / 2, "blas") == "blas"
    assert gemm.pick(1.0, 1.0 - 2 * margin, "blas") == "onednn"
    assert gemm.pick(1.0 - margin / 2, 1.0, "onednn") == "onednn"
    assert gemm.pick(1.0 - 2 * margin, 1.0, "onednn") == "blas"


@pytest.fixture
def fake_costs(monkeypatch) -> dict[str, object]:
    """Each backend's product advances a fake clock by ``costs[backend]`` seconds (or by the next of a list of
    them) and is counted in ``costs['calls']``; no key is timed or decided yet, each is tried on the other
    backend after its first product, the rule's backend is BLAS (a oneDNN rule takes weights of any width), no
    product is below oneDNN's floor and packing costs nothing."""
    state: dict[str, object] = {"now": 0.0, "blas": 1e-4, "onednn": 1e-4, "calls": []}
    plain, kernel = F.linear, gemm._onednn_linear

    def advance(backend: str) -> None:
        cost = state[backend]
        state["now"] += cost.pop(0) if isinstance(cost, list) else cost
        state["calls"].append(backend)

    def blas(x, weight, bias=None):
        advance("blas")
        return plain(x, weight, bias)

    def onednn(x, weight, bias):
        advance("onednn")
        return kernel(x, weight, bias)

    monkeypatch.setattr(gemm.F, "linear", blas)
    monkeypatch.setattr(gemm, "_onednn_linear", onednn)
    monkeypatch.setattr(gemm, "time", SimpleNamespace(perf_counter=lambda: state["now"]))
    monkeypatch.setattr(gemm, "_choices", {})
    monkeypatch.setattr(gemm, "_timings", {})
    monkeypatch.setattr(gemm, "_decided_by_threads", {})
    monkeypatch.setattr(gemm, "_floors", {torch.get_num_threads(): 0.0})
    monkeypatch.setattr(gemm, "_pack_rates", {torch.get_num_threads(): 0.0})  # packing costs nothing here
    monkeypatch.setattr(gemm, "TIMING_AFTER_S", 0.0)
    monkeypatch.setattr(gemm, "RETRY_AFTER_S", 0.0)
    monkeypatch.setattr(gemm, "resolve", lambda backend: "blas" if backend == "auto" else backend)
    monkeypatch.setattr(gemm, "AUTO_MIN_WIDTH", 1)  # a oneDNN rule takes these tests' small weights too
    return state


TRIAL = ["onednn"] * (gemm.TRIAL_RUNS + 1)  # a key's products on the other backend: one untimed, then timed


def timing_calls(faster: str, rule: str = "blas") -> list[str]:
    """The backends a key's products run on until its choice, with one weight and no time thresholds: the rule's
    until it has a trial's count of timed products, then the other's trial; where the rule's is faster, the same
    again (its second trial)."""
    other = "onednn" if rule == "blas" else "blas"
    first = [rule] * gemm.TRIAL_RUNS + [other] * len(TRIAL)
    return first * (2 if faster == rule else 1)


@needs_onednn
@pytest.mark.parametrize("faster", ["blas", "onednn"])
def test_timed_auto_times_each_key_on_its_own_products_and_keeps_the_faster(fake_costs, faster):
    torch.manual_seed(4)
    layer = gemm.Linear(16, 40).requires_grad_(False)
    fake_costs["onednn" if faster == "blas" else "blas"] = 1.3e-4  # a close call: tried again where BLAS wins
    with gemm.cpu_gemm("auto", timed=True) as backend, torch.inference_mode():
        assert backend == "timed"
        expected = timing_calls(faster)
        for _ in expected:  # one key: a beam of 5
            x = torch.randn(5, 16)
            torch.testing.assert_close(layer(x), x @ layer.weight.t() + layer.bias, rtol=1e-5, atol=1e-5)
        assert fake_costs["calls"] == expected, "the rule's backend, then the other's trial (twice where the rule's " \
                                                "wins the first), none twice"
        assert list(gemm._choices.values()) == [faster] and gemm._timings == {}
        for _ in range(3):
            layer(torch.randn(5, 16))
        assert fake_costs["calls"][len(expected):] == [faster] * 3, "decided once per key"
        decided = gemm._decided_by_threads[torch.get_num_threads()]
        assert decided == {(layer.weight.shape, 5): faster}, "kept by its rows"
        layer(torch.randn(6, 16))  # another row count is timed anew
    assert len(gemm._choices) == 1 and len(gemm._timings) == 1
    assert gemm._has_packed(layer.weight) == (faster == "onednn"), "a weight packed for nothing is let go"


def run_until_decided(weight: torch.Tensor, rows: int, limit: int = 20) -> int:
    """How many products of ``rows`` rows by ``weight`` ran until their key's choice was made (at most ``limit``)."""
    for products in range(1, limit + 1):
        gemm.linear(torch.randn(rows, weight.size(1)), weight)
        if gemm._choices:
            return products
    raise AssertionError(f"no choice after {limit} products")


@needs_onednn
@pytest.mark.parametrize("faster", ["blas", "onednn"])
def test_a_keys_trial_moves_all_its_weights_to_the_other_backend_and_a_lost_trial_lets_their_packing_go(
        fake_costs, monkeypatch, faster):
    packed_weights = []
    pack = gemm._pack
    monkeypatch.setattr(gemm, "_pack", lambda weight: packed_weights.append(weight) or pack(weight))
    fake_costs["onednn" if faster == "blas" else "blas"] = 1.3e-4
    layers = [torch.randn(40, 16) for _ in range(3)]  # three layers of one shape: one key
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        for _ in range(8):  # rounds of a decoding step's three products
            for weight in layers:
                gemm.linear(torch.randn(5, 16), weight)
        assert list(gemm._choices.values()) == [faster]
        assert [gemm._has_packed(weight) for weight in layers] == [faster == "onednn"] * 3
    assert [id(weight) for weight in packed_weights] == [id(weight) for weight in layers], \
        "each weight packed once, by the first trial"
    rounds = [fake_costs["calls"][i:i + 3] for i in range(0, 24, 3)]
    rule, trial = ["blas"] * 3, ["onednn"] * 3  # the rule's 3 products, then the trial's: 3 packing, 3 timed
    if faster == "onednn":
        assert rounds == [rule, trial, trial] + [trial] * 5, "the whole key on oneDNN, then kept there"
    else:  # the rule's kept at the first trial is tried again (its first product untimed, then 3)
        assert rounds == [rule, trial, trial, rule, trial, ["onednn", "blas", "blas"]] + [rule] * 2


@needs_onednn
@pytest.mark.parametrize("outlier, faster", [(2e-5, "onednn"), (2e-3, "blas")])
def test_a_choice_judges_each_backend_on_its_typical_product_not_one_lucky_or_slow(
        fake_costs, monkeypatch, outlier, faster):
    layers = [torch.randn(40, 16) for _ in range(4)]  # one key of four layers
    typical = 1e-4 if faster == "onednn" else 1.2e-4  # BLAS's usual product, and oneDNN's
    fake_costs["onednn"] = typical
    usual = 2 * typical if faster == "onednn" else 1e-4
    fake_costs["blas"] = [usual] * 3 + [outlier] + [usual] * 60
    monkeypatch.setattr(gemm, "TIMING_AFTER_S", 7.5 * usual)  # the outlier among the rule's products judged
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        for _ in range(10):
            for weight in layers:
                gemm.linear(torch.randn(5, 16), weight)
    assert fake_costs["calls"].count("onednn") >= len(TRIAL)
    assert list(gemm._choices.values()) == [faster], "a lucky BLAS product keeps no slower BLAS, a slow one loses none"


@needs_onednn
def test_a_key_the_rules_backend_kept_is_tried_again_beside_its_neighbours_final_backends(fake_costs):
    weight = torch.randn(40, 16)
    fake_costs["onednn"] = [1.4e-4] * len(TRIAL) + [5e-5] * 20  # slow beside BLAS products, fast once they left
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        products = run_until_decided(weight, 5)
    assert fake_costs["calls"] == timing_calls("blas")[:products], "a first trial that kept BLAS, then a second"
    assert list(gemm._choices.values()) == ["onednn"], "the second trial decides"


@needs_onednn
@pytest.mark.parametrize("rule", ["blas", "onednn"])
def test_a_trial_the_rules_backend_wins_by_far_decides_without_a_second(fake_costs, monkeypatch, rule):
    monkeypatch.setattr(gemm, "resolve", lambda backend: rule if backend == "auto" else backend)
    fake_costs["blas" if rule == "onednn" else "onednn"] = 1e-4 * gemm.RETRY_WITHIN * 1.1  # beyond a close call
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        products = run_until_decided(torch.randn(40, 16), 5)
    other = "blas" if rule == "onednn" else "onednn"
    packing = [rule] if rule == "onednn" else []  # the first product packs the weight: not a product's time
    assert fake_costs["calls"] == packing + [rule] * gemm.TRIAL_RUNS + [other] * len(TRIAL)
    assert products == len(fake_costs["calls"]) and list(gemm._choices.values()) == [rule]


@needs_onednn
def test_a_key_waiting_for_its_trial_times_only_the_products_the_trial_judges(fake_costs, monkeypatch):
    cost = 2.0 ** -13  # exact in binary, so the wait's estimate is exact too
    fake_costs.update(blas=cost, onednn=cost / 2)
    monkeypatch.setattr(gemm, "TIMING_AFTER_S", 40 * cost)  # a wait of 40 BLAS products
    reads = []
    clock = gemm.time.perf_counter
    monkeypatch.setattr(gemm, "time", SimpleNamespace(perf_counter=lambda: reads.append(1) or clock()))
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        run_until_decided(torch.randn(40, 16), 5, limit=60)
    assert fake_costs["calls"].index("onednn") == 40, "the trial after 40 products, as if each were timed"
    timed = gemm.TRIAL_RUNS + gemm.RULE_RUNS + len(TRIAL)  # the first median, the trial's judges, the trial
    assert len(reads) == 2 * timed, "the 29 products between ran untimed"
    assert list(gemm._choices.values()) == ["onednn"]


@needs_onednn
@pytest.mark.parametrize("rule", ["blas", "onednn"])
def test_above_a_beams_rows_products_keep_the_rules_backend_untimed(fake_costs, monkeypatch, rule):
    monkeypatch.setattr(gemm, "resolve", lambda backend: rule if backend == "auto" else backend)
    fake_costs["blas" if rule == "onednn" else "onednn"] = 1e-5  # the other is ten times faster
    weight = torch.randn(40, 16)
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        for rows in (gemm.SMALL_ROW_BUCKET + 1, 100, 100, 100, 100, 100):
            gemm.linear(torch.randn(rows, 16), weight)
        assert gemm._timings == {} and gemm._choices == {}
        assert set(fake_costs["calls"]) == {rule}
        run_until_decided(weight, gemm.SMALL_ROW_BUCKET)  # a beam's rows are timed
    assert list(gemm._choices.values()) == ["blas" if rule == "onednn" else "onednn"]


@needs_onednn
@pytest.mark.parametrize("rule", ["blas", "onednn"])
def test_a_key_is_tried_once_its_products_have_taken_the_threshold_and_again_where_the_rule_won(
        fake_costs, monkeypatch, rule):
    monkeypatch.setattr(gemm, "resolve", lambda backend: rule if backend == "auto" else backend)
    monkeypatch.setattr(gemm, "TIMING_AFTER_S", 2.5e-4)
    monkeypatch.setattr(gemm, "RETRY_AFTER_S", 4.5e-4)
    if rule == "blas":
        fake_costs.update(blas=1e-4, onednn=5e-5)
    else:
        fake_costs["blas"] = 1.3e-4  # a close call: the rule's kept is tried again
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        run_until_decided(torch.randn(40, 16), 5)
    other = "blas" if rule == "onednn" else "onednn"
    packing = [rule] if rule == "onednn" else []  # the first product packs the weight: not a product's time
    first = [rule] * 3 + [other] * len(TRIAL)  # 3e-4 on the rule's, then the trial
    second = [rule] * 5 + [other] * len(TRIAL) if rule == "onednn" else []  # the rule's kept: 5e-4 more, again
    assert fake_costs["calls"] == packing + first + second
    assert list(gemm._choices.values()) == ["onednn"]


@needs_onednn
def test_a_key_faster_than_onednns_floor_keeps_blas_untried(fake_costs, monkeypatch):
    monkeypatch.setattr(gemm, "_floors", {})
    monkeypatch.setattr(gemm, "TIMING_AFTER_S", 2.5e-4)
    fake_costs["onednn"] = 3e-4  # the floor's product too
    weight = torch.randn(40, 16)
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        run_until_decided(weight, 5)
        floor_calls = ["onednn"] * (gemm.FLOOR_RUNS + 1)  # the floor's product, once untimed
        assert fake_costs["calls"] == ["blas"] + floor_calls, "decided at its first product, oneDNN never tried"
        assert gemm._floors == {torch.get_num_threads(): pytest.approx(3e-4)} and not gemm._has_packed(weight)
        fake_costs["blas"] = 4e-4  # slower than the floor: tried
        gemm._choices.clear()
        run_until_decided(weight, 9)
    assert gemm._choices == {(40, 16, 9, torch.get_num_threads()): "onednn"}


@needs_onednn
def test_a_trial_that_packs_waits_for_twenty_times_the_packing_and_one_that_packs_nothing_does_not(
        fake_costs, monkeypatch):
    fake_costs["onednn"] = 5e-5  # oneDNN the faster: the trial keeps it
    layers = [torch.randn(40, 16) for _ in range(2)]  # one key of two layers, 1,280 elements to pack
    packing = 9.5e-4 / gemm.PACK_PAYBACK  # their packing's estimate: a trial once BLAS's products took 0.95 ms
    monkeypatch.setattr(gemm, "_pack_rates", {torch.get_num_threads(): packing / 1280})
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        for _ in range(8):
            for weight in layers:
                gemm.linear(torch.randn(5, 16), weight)
        assert fake_costs["calls"].index("onednn") == 10, "ten BLAS products of 0.1 ms, then the trial"
        assert list(gemm._choices.values()) == ["onednn"] and all(gemm._has_packed(weight) for weight in layers)
        before = len(fake_costs["calls"])
        for _ in range(2):
            for weight in layers:
                gemm.linear(torch.randn(6, 16), weight)  # another key of the same, now packed, weights
    assert fake_costs["calls"][before:] == ["blas"] * gemm.TRIAL_RUNS + ["onednn"], \
        "nothing left to pack: tried after the usual products"


@needs_onednn
def test_pack_rate_is_measured_once_per_thread_count(monkeypatch):
    monkeypatch.setattr(gemm, "_pack_rates", {})
    rate = gemm.pack_rate()
    assert 0 < rate < 1e-6, "a 512 x 512 weight packs in well under a quarter second"
    assert gemm.pack_rate() == rate and list(gemm._pack_rates) == [torch.get_num_threads()]


@needs_onednn
def test_only_decodings_auto_is_timed(fake_costs):
    x, weight = torch.randn(4, 8), torch.randn(6, 8)
    with gemm.cpu_gemm("auto") as backend:  # training: the rule
        assert backend == gemm.resolve("auto")
        with gemm.cpu_gemm("auto", timed=True) as inner:
            assert inner == backend, "a training run's validation keeps the rule"
    for setting in ("blas", "onednn"):
        with gemm.cpu_gemm(setting, timed=True) as backend:
            assert backend == setting
    with gemm.cpu_gemm("auto", timed=True):
        gemm.linear(torch.randn(4, 8, requires_grad=True), weight)  # a product with gradients keeps the rule
        with torch.autocast("cpu", dtype=torch.bfloat16):
            gemm.linear(x, weight)
        assert gemm._timings == {}
        with torch.no_grad():
            gemm.linear(x, weight)
    assert len(gemm._timings) == 1


@needs_onednn
def test_a_decided_key_is_kept_for_its_thread_count_and_a_block_under_autocast_is_not_timed(fake_costs):
    weight, threads = torch.randn(40, 16), torch.get_num_threads()
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        run_until_decided(weight, 5)
        gemm.linear(torch.randn(5, 16), weight)
    assert gemm._decided_by_threads == {threads: {(weight.shape, 5): "blas"}}
    gemm._decided_by_threads[threads][weight.shape, 5] = "onednn"  # the fast path follows the kept choice
    with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
        gemm.linear(torch.randn(5, 16), weight)
    assert fake_costs["calls"][-1] == "onednn"
    gemm._floors[threads + 1] = 0.0
    try:
        torch.set_num_threads(threads + 1)
        with gemm.cpu_gemm("auto", timed=True), torch.no_grad():
            gemm.linear(torch.randn(5, 16), weight)
    finally:
        torch.set_num_threads(threads)
    assert fake_costs["calls"][-1] == "blas" and len(gemm._timings) == 1, "another thread count is timed anew"
    with torch.autocast("cpu", dtype=torch.bfloat16), gemm.cpu_gemm("auto", timed=True) as backend:
        assert backend == gemm.resolve("auto")
