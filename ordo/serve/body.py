"""The request body of ``ordo serve``: read at most ``max_body_bytes`` of it, and only UTF-8.

:class:`BodyLimit` wraps the application (pure ASGI, so that it sees each chunk as it arrives). For a POST it
refuses a ``Content-Length`` over the limit before reading a byte, reads a body without one chunk by chunk and
stops at the first chunk that takes it over the limit, and refuses a body that is not UTF-8; then it hands the
body it read to the application. Every refusal is ``{"detail": "..."}`` naming the limit and its value, as the
application's own are.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class BodyRefusal(Exception):
    """A body the server refuses before the application sees it: ``status`` and a one-line reason."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def over_limit(size: int | None, limit: int) -> BodyRefusal:
    """The 413 for a body of ``size`` bytes (None: not known, the read stopped at the limit) over ``limit``."""
    has = f"{size} bytes, more than" if size is not None else "more bytes than"
    return BodyRefusal(413, f"the request body has {has} the limit max_body_bytes={limit}")


def declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The ``Content-Length`` of a request, or None without one (a chunked body) or with one that is no number."""
    for name, value in headers:
        if name.lower() == b"content-length":
            return int(value) if value.strip().isdigit() else None
    return None


async def read_body(receive: Receive, limit: int, declared: int | None) -> bytes | None:
    """The whole body, read from ``receive`` chunk by chunk, stopping as soon as it passes ``limit`` bytes; None
    when the client left before sending all of it.

    Raises:
        BodyRefusal: 413 when ``declared`` (the Content-Length) or the bytes read pass ``limit``; 400 when the body
            is not UTF-8.
    """
    if declared is not None and declared > limit:
        raise over_limit(declared, limit)
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise over_limit(None, limit)
        chunks.append(chunk)
        more = message.get("more_body", False)
    body = b"".join(chunks)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BodyRefusal(400, f"the request body is not UTF-8 (byte {err.start})") from None
    return body


async def send_refusal(send: Send, refusal: BodyRefusal) -> None:
    """Answer ``refusal`` as JSON ``{"detail": ...}``."""
    payload = json.dumps({"detail": refusal.detail}).encode("utf-8")
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` as one message, then whatever ``receive`` gives (a disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


class BodyLimit:
    """ASGI middleware: a POST's body is read here, at most ``max_body_bytes`` of it, and must be UTF-8.

    Args:
        app: the application that gets the body once it passed.
        max_body_bytes: the most bytes a request body may have (413 beyond).
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Check the body of a POST, then pass the request on; anything else passes untouched."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(receive, self.max_body_bytes, declared_length(scope["headers"]))
        except BodyRefusal as refusal:
            await send_refusal(send, refusal)
            return
        if body is not None:
            await self.app(scope, replay(body, receive), send)
