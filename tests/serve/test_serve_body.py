"""``ordo serve``'s limit on the request body: a body over ``max_body_bytes`` gets 413 naming the limit, and the
server reads no more of it than the limit (a declared Content-Length over it: nothing at all)."""

import asyncio
import json

import pytest

pytest.importorskip("fastapi", reason="ordo[serve] is not installed")
import httpx
from fastapi.testclient import TestClient
from serve_helpers import live_server

from ordo.cli import main
from ordo.serve.app import ServeLimits, create_app
from ordo.serve.body import BodyLimit

LIMIT = 2000


@pytest.fixture(scope="module")
def client(loaded_run):
    app = create_app({"tiny": loaded_run}, ServeLimits(max_body_bytes=LIMIT))
    with TestClient(app) as test_client:
        yield test_client


def body_of(size: int) -> bytes:
    """A valid translation request of exactly ``size`` bytes."""
    empty = json.dumps({"text": ["a ."], "references": [""]}).encode()
    return json.dumps({"text": ["a ."], "references": ["x" * (size - len(empty))]}).encode()


def test_a_body_at_the_limit_is_translated_and_one_byte_more_gets_413_naming_the_limit(client):
    at_limit, over = body_of(LIMIT), body_of(LIMIT + 1)
    assert len(at_limit) == LIMIT and len(over) == LIMIT + 1
    headers = {"content-type": "application/json"}
    assert client.post("/v1/translate", content=at_limit, headers=headers).status_code == 200
    answer = client.post("/v1/translate", content=over, headers=headers)
    assert answer.status_code == 413, answer.text
    assert answer.json() == {"detail": f"the request body has {LIMIT + 1} bytes, more than the limit "
                                       f"max_body_bytes={LIMIT}"}


def test_a_chunked_body_over_the_limit_gets_413_from_a_real_server(loaded_run):
    app = create_app({"tiny": loaded_run}, ServeLimits(max_body_bytes=LIMIT))

    def chunks():  # no Content-Length: the server only learns the size by reading
        yield b'{"text": ["'
        for _ in range(10):
            yield b"word " * 100
        yield b'"]}'

    with live_server(app) as url:
        answer = httpx.post(f"{url}/v1/translate", content=chunks(), headers={"content-type": "application/json"},
                            timeout=60)
        after = httpx.post(f"{url}/v1/translate", json={"text": ["a ."]}, timeout=60)
    assert answer.status_code == 413, answer.text
    assert answer.json() == {"detail": f"the request body has more bytes than the limit max_body_bytes={LIMIT}"}
    assert after.status_code == 200


def scripted_receive(chunk: bytes, count: int):
    """An ASGI ``receive`` that gives ``count`` chunks of ``chunk``, and a list of how many it gave."""
    given = []

    async def receive():
        given.append(len(chunk))
        return {"type": "http.request", "body": chunk, "more_body": len(given) < count}

    return receive, given


def call_limited(headers: list[tuple[bytes, bytes]], receive) -> tuple[list[dict], list[bool]]:
    """Run a POST through :class:`BodyLimit` (limit 250) around an app that records being called."""
    sent, reached = [], []

    async def inner(scope, receive, send):
        reached.append(True)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/translate", "headers": headers}
    asyncio.run(BodyLimit(inner, max_body_bytes=250)(scope, receive, send))
    return sent, reached


def test_the_read_stops_at_the_first_chunk_past_the_limit():
    receive, given = scripted_receive(b"x" * 100, count=1000)
    sent, reached = call_limited([], receive)
    assert len(given) == 3  # 300 bytes: the first read past 250
    assert not reached
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["detail"].endswith("max_body_bytes=250")


def test_a_declared_content_length_over_the_limit_is_refused_before_any_read():
    receive, given = scripted_receive(b"x" * 100, count=1000)
    sent, reached = call_limited([(b"content-length", b"100000")], receive)
    assert given == [] and not reached
    assert json.loads(sent[1]["body"]) == {"detail": "the request body has 100000 bytes, more than the limit "
                                                     "max_body_bytes=250"}


def test_a_body_within_the_limit_reaches_the_app_whole():
    receive, given = scripted_receive(b"y" * 50, count=4)
    seen = []

    async def inner(scope, receive, send):
        seen.append(await receive())

    async def send(message):
        raise AssertionError(f"nothing to refuse, got {message}")

    scope = {"type": "http", "method": "POST", "path": "/v1/translate", "headers": []}
    asyncio.run(BodyLimit(inner, max_body_bytes=250)(scope, receive, send))
    assert given == [50] * 4
    assert seen == [{"type": "http.request", "body": b"y" * 200, "more_body": False}]


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_body_limit_below_one_byte_is_an_error(value, tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path / "not-loaded"), "--max-body-bytes", value]) == 2
    assert capsys.readouterr().err == f"ordo serve: error: --max-body-bytes: {value} must be positive\n"
