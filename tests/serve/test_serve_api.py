"""``ordo serve``'s JSON API against a tiny trained run: every endpoint, every refusal with its status code and
message, and concurrent requests giving the outputs of ``ordo translate``."""

import asyncio
import os
import socket
import sys
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="ordo[serve] is not installed")
import httpx
from fastapi.testclient import TestClient
from serve_helpers import live_server

from ordo.build import count_parameters
from ordo.cli import main
from ordo.data.source import SourceEncoder
from ordo.errors import InputError
from ordo.serve import app as app_module
from ordo.serve.app import ServeLimits, create_app, one_line


@pytest.fixture(scope="module")
def run(loaded_run):
    return loaded_run


@pytest.fixture(scope="module")
def texts(small_test_sources):
    return small_test_sources[:40]


@pytest.fixture(scope="module")
def client(run):
    app = create_app({"tiny": run}, ServeLimits(max_batch_sentences=8, max_sentence_tokens=30))
    with TestClient(app) as test_client:
        yield test_client


def test_models_health_docs_and_page(client, run):
    models = client.get("/v1/models").json()
    assert models == [{"name": "tiny", "family": "transformer", "methods": [], "parameters": count_parameters(run.model),
                       "src_vocab_size": len(run.src_vocab), "tgt_vocab_size": len(run.tgt_vocab),
                       "max_sentence_tokens": 30, "max_batch_sentences": 8, "beam_size": run.cfg.decode.beam_size}]
    assert client.get("/healthz").json() == {"status": "ok", "models": ["tiny"], "queued_sentences": 0}
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/translate", "/v1/models", "/healthz"} <= set(paths)
    docs = client.get("/docs")
    assert docs.status_code == 200 and "text/html" in docs.headers["content-type"]
    assert "<code>POST /v1/translate</code>" in docs.text and "<code>GET /healthz</code>" in docs.text
    assert "<code>beam_size</code>" in docs.text and "1: greedy; default: the run&#x27;s" in docs.text
    assert "<h4>SentenceResult</h4>" in docs.text  # a body nested in the answer
    assert "<script" not in docs.text and "://" not in docs.text  # nothing from another host
    assert client.get("/redoc").status_code == 404
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]


def test_translations_scores_and_n_best_are_those_of_the_python_api(client, run, texts):
    body = client.post("/v1/translate", json={"text": texts[:5], "beam_size": 3, "n_best": 2}).json()
    assert body["model"] == "tiny"
    assert body["translations"] == run.translate(texts[:5], beam_size=3)
    hyps = run.translate_hypotheses(texts[:5], beam_size=3, nbest=2)
    for sentence, expected in zip(body["sentences"], hyps):
        assert [c["text"] for c in sentence["n_best"]] == [run.detokenize(h) for h in expected]
        assert sentence["score"] == pytest.approx(expected[0].score, abs=1e-5)
        assert "attention" not in sentence and "links" not in sentence  # not asked for


def test_attention_has_a_row_per_target_token_and_a_column_per_source_token(client, run, texts):
    body = client.post("/v1/translate", json={"text": texts[:3], "return_attention": True,
                                              "return_alignment": True, "references": texts[:3]}).json()
    details = run.translate_detailed(texts[:3])
    for sentence, detail in zip(body["sentences"], details):
        assert len(sentence["attention"]) == len(sentence["target_tokens"]) == len(detail.target_tokens)
        assert {len(row) for row in sentence["attention"]} == {len(sentence["source_tokens"])}
        assert [tuple(link) for link in sentence["links"]] == detail.links
        assert sentence["tau"] == pytest.approx(detail.tau)
        assert sentence["source_in_target_order"] == detail.source_in_target_order
        assert 0.0 <= sentence["ribes"] <= 1.0


def test_line_breaks_nul_and_blank_sentences_each_give_exactly_one_output(client, run):
    tricky = ["the red hill\u2028dances .", "a green\rforest sang .", "the cat\x00sat .", "one\ntwo", "", "  "]
    body = client.post("/v1/translate", json={"text": tricky}).json()
    assert len(body["translations"]) == len(tricky)
    assert body["translations"] == run.translate([one_line(t) for t in tricky])
    assert body["translations"][4:] == ["", ""]


@pytest.mark.parametrize(("payload", "status", "message"), [
    ({"text": ["a"] * 9}, 413, "9 sentences in one request, more than the limit max_batch_sentences=8"),
    ({"text": ["ok .", " ".join(["word"] * 40)]}, 413, "text[1]:"),
    ({"text": []}, 422, "text: List should have at least 1 item"),
    ({"text": "a sentence"}, 422, "text: Input should be a valid list"),
    ({"text": [1, 2]}, 422, "text.0: Input should be a valid string"),
    ({"text": ["a"], "beam_size": "5"}, 422, "beam_size: Input should be a valid integer"),
    ({"text": ["a"], "beam": 5}, 422, "beam: Extra inputs are not permitted"),
    ({}, 422, "text: Field required"),
    ({"text": ["a"], "beam_size": 2, "n_best": 3}, 422, "n_best: 3 hypotheses from a beam of 2"),
    ({"text": ["a", "b"], "references": ["a"]}, 422, "references: 1 given for 2 sentences"),
    ({"text": ["a"], "model": "../../etc/passwd"}, 404, "unknown model '../../etc/passwd'; this server has 'tiny'"),
    ({"text": ["a ."], "references": [" ".join(["word"] * 40)]}, 413,
     "references[0]: 40 tokens, more than the limit max_sentence_tokens=30"),
])
def test_refusals_name_the_reason(client, payload, status, message):
    answer = client.post("/v1/translate", json=payload)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["detail"]


def test_a_sentence_over_the_limit_names_the_limit(client):
    detail = client.post("/v1/translate", json={"text": ["ok .", " ".join(["word"] * 40)]}).json()["detail"]
    assert detail.endswith("source tokens, more than the limit max_sentence_tokens=30")


@pytest.mark.parametrize(("body", "message"), [
    (b'{"text": ["a"', "malformed JSON: Expecting "),
    (b'{"text": ["\xff\xfe"]}', "the request body is not UTF-8 (byte 11)"),
    (b"not json", "malformed JSON: Expecting value (character 0)"),
])
def test_malformed_json_and_invalid_utf8_get_400(client, body, message):
    answer = client.post("/v1/translate", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["detail"]


@pytest.mark.parametrize(("body", "message"), [
    (b'{"text": ["ok .", "a \\ud800 b"]}', "text[1]: U+D800 is a lone surrogate, not a character"),
    (b'{"text": ["ok .", "a"], "references": ["", "\\udfff"]}',
     "references[1]: U+DFFF is a lone surrogate, not a character"),
])
def test_a_lone_surrogate_escaped_in_json_gets_422_naming_the_sentence(client, body, message):
    answer = client.post("/v1/translate", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == message


def test_a_source_the_model_cannot_encode_gets_422(client, monkeypatch):
    def refuse(self, texts, labels):
        raise InputError(f"{labels[0]}: the segmenters (spm:8000, chars) cover different text")

    monkeypatch.setattr(SourceEncoder, "encode", refuse)
    answer = client.post("/v1/translate", json={"text": ["ｆｕｌｌ ."]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "text[0]: the segmenters (spm:8000, chars) cover different text"


def test_health_answers_while_sentence_ribes_is_computed(run):
    started, release = threading.Event(), threading.Event()

    def slow_ribes(hypothesis, reference):
        started.set()
        release.wait(20)
        return 0.5

    async def scenario(url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            scored = asyncio.ensure_future(http.post("/v1/translate", json={"text": ["a ."], "references": ["a ."]}))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 20)
            health = await http.get("/healthz", timeout=5)
            release.set()
            return health, await scored

    with pytest.MonkeyPatch.context() as patch, live_server(create_app({"tiny": run})) as url:
        patch.setattr(app_module, "text_ribes", slow_ribes)
        try:
            health, scored = asyncio.run(scenario(url))
        finally:
            release.set()
    assert health.status_code == 200
    assert scored.status_code == 200 and scored.json()["sentences"][0]["ribes"] == 0.5


def test_concurrent_requests_give_the_outputs_of_ordo_translate(run, texts, trained_run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input", str(source),
                 "--output", str(tmp_path / "out.txt")]) == 0
    offline = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    groups = [texts[i:i + 1 + i % 4] for i in range(0, len(texts), 5)]
    app = create_app({"tiny": run}, ServeLimits(window_s=0.05))
    calls = []
    translate_detailed = run.translate_detailed

    def counted(sentences, **kwargs):
        calls.append(len(sentences))
        return translate_detailed(sentences, **kwargs)

    async def send_all(url):
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            answers = await asyncio.gather(*(http.post("/v1/translate", json={"text": g}) for g in groups))
        return [a.json()["translations"] for a in answers]

    with pytest.MonkeyPatch.context() as patch, live_server(app) as url:
        patch.setattr(run, "translate_detailed", counted)
        served = asyncio.run(send_all(url))
    for group, start, translations in zip(groups, range(0, len(texts), 5), served):
        assert translations == offline[start:start + len(group)]
    assert len(calls) < len(groups)  # requests were batched together


def test_a_full_queue_gives_503_with_retry_after_and_a_timeout_504_while_health_answers(run):
    started, release, blocked_done = threading.Event(), threading.Event(), threading.Event()
    translate_detailed = run.translate_detailed

    def blocking(sentences, **kwargs):
        if "block ." not in sentences:
            return translate_detailed(sentences, **kwargs)
        started.set()
        release.wait(20)
        try:
            return translate_detailed(sentences, **kwargs)
        finally:
            blocked_done.set()

    app = create_app({"tiny": run}, ServeLimits(window_s=0.0, timeout_s=1.0, max_queue_sentences=2))

    async def scenario(url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            blocked = asyncio.ensure_future(http.post("/v1/translate", json={"text": ["block ."]}))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 20)
            waiting = asyncio.ensure_future(http.post("/v1/translate", json={"text": ["a .", "b ."]}))
            await asyncio.sleep(0.2)
            health = await http.get("/healthz")
            full = await http.post("/v1/translate", json={"text": ["c ."]})
            timed_out = await blocked
            late = await waiting  # its own timeout passes while the blocked batch still holds the model
            release.set()
            # the 1 s timeout is for "after ." alone, not for the blocked batch still translating on busy cores
            await asyncio.get_running_loop().run_in_executor(None, blocked_done.wait, 20)
            after = await http.post("/v1/translate", json={"text": ["after ."]})
        return health, full, timed_out, late, after

    with pytest.MonkeyPatch.context() as patch, live_server(app) as url:
        patch.setattr(run, "translate_detailed", blocking)
        start = time.monotonic()
        health, full, timed_out, late, after = asyncio.run(scenario(url))
    assert time.monotonic() - start < 30
    assert health.status_code == 200 and health.json()["queued_sentences"] == 2
    assert full.status_code == 503 and full.headers["retry-after"] == "1"
    assert "the server is busy" in full.json()["detail"] and "queue holds 2" in full.json()["detail"]
    assert timed_out.status_code == 504 and "not translated within 1 s" in timed_out.json()["detail"]
    assert late.status_code == 504  # it waited behind the blocked batch past its own timeout
    assert after.status_code == 200 and after.json()["translations"] == run.translate(["after ."])


def test_serve_without_fastapi_names_the_serve_extra(monkeypatch, trained_run, capsys):
    monkeypatch.setitem(sys.modules, "fastapi", None)
    assert main(["serve", "--model", str(trained_run)]) == 2
    assert capsys.readouterr().err == "ordo serve: error: fastapi is not installed; pip install 'ordo[serve]'\n"


def test_a_model_name_given_twice_is_an_error(trained_run, capsys):
    assert main(["serve", "--model", f"a={trained_run}", "--model", f"a={trained_run}"]) == 2
    assert "the name 'a' is given twice" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["a=", "=runs/base"])
def test_a_model_with_an_empty_name_or_run_is_an_error(spec, capsys):
    assert main(["serve", "--model", spec]) == 2
    assert capsys.readouterr().err == f"ordo serve: error: --model {spec}: expected RUN or NAME=RUN\n"


def test_a_run_folder_with_an_equals_sign_is_a_run_not_a_name(tmp_path):
    """Before, ``--model runs/lr=1e-3`` was read as the run ``1e-3`` named ``runs/lr``."""
    from ordo.cli.serving import _served_runs

    run = tmp_path / "lr=1e-3"
    run.mkdir()
    assert _served_runs([str(run), f"b={run}"]) == [("lr=1e-3", run), ("b", run)]


def test_a_port_in_use_is_an_error_before_the_models_load(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--model", str(tmp_path / "not-loaded"), "--port", str(port)]) == 2
    assert capsys.readouterr().err.startswith(f"ordo serve: error: 127.0.0.1:{port}: cannot listen (")


@pytest.mark.parametrize(("flag", "value"), [("--max-sentence-tokens", "-3"), ("--batch-window-ms", "-5")])
def test_a_negative_limit_is_an_error_rather_than_the_default(flag, value, tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path / "not-loaded"), flag, value]) == 2
    assert capsys.readouterr().err == f"ordo serve: error: {flag}: {value} must be 0 or more\n"


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_refused_by_its_flag(port, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--model", "run", "--port", port])
    assert stopped.value.code == 2
    assert "argument --port: " in capsys.readouterr().err


def test_serve_makes_openmp_threads_wait_passively_unless_the_user_said_otherwise(monkeypatch):
    from ordo import wait_policy
    from ordo.cli import set_verb_environment

    monkeypatch.setenv("OMP_WAIT_POLICY", "")  # so that the teardown restores what was there before
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(wait_policy, "other_runnable", lambda: 0)  # quiet cores
    set_verb_environment(["translate", "--model", "x"])
    assert "OMP_WAIT_POLICY" not in os.environ
    set_verb_environment(["serve", "--model", "x"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    set_verb_environment(["serve", "--model", "x"])
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
