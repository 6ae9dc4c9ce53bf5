"""The FastAPI application of ``ordo serve``: the JSON API, its limits and status codes, and the web page.

Endpoints: ``POST /v1/translate``, ``GET /v1/models``, ``GET /healthz``, the page at ``/`` (files under
``static/``) and the API's description at ``/docs`` (:mod:`ordo.serve.api_page`, written from the OpenAPI schema:
no CDN). Models are loaded once, by the CLI, from the run
directories its operator names; a request only picks one of them by name, so nothing a client sends reaches a
file path, a shell or ``torch.load``.

Refusals (every one a JSON body ``{"detail": "..."}`` naming the reason or the limit):
400 malformed JSON or a body that is not UTF-8; 422 wrong types, an empty ``text`` list, ``n_best`` over the
beam, references not one per sentence, a lone UTF-16 surrogate (a JSON escape) in a sentence, a sentence the model
cannot encode; 404 an unknown model; 413 a body of more bytes than the limit (refused as soon as the read passes
it, see :mod:`ordo.serve.body`), too many sentences in a request or too many tokens in a sentence or a reference;
503 the queue is full (with ``Retry-After``); 504 not translated within the timeout.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from ordo.api import LoadedRun
from ordo.build import count_parameters
from ordo.data.source import SourceEncoder
from ordo.detail import TranslationDetail, text_ribes
from ordo.errors import OrdoError
from ordo.evaluation.order import ribes_tokens
from ordo.serve.api_page import api_page
from ordo.serve.batching import MicroBatcher, QueueFullError
from ordo.serve.body import BodyLimit
from ordo.serve.schemas import Health, ModelInfo, TranslateRequest, TranslateResponse, sentence_result

logger = logging.getLogger("ordo.serve")

STATIC_DIR = Path(__file__).parent / "static"
RETRY_AFTER_S = 1
LINE_BREAKS = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")  # control characters and line separators
SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: JSON can escape one, UTF-8 cannot hold it


@dataclass
class ServeLimits:
    """What one request may ask for, and how the server batches.

    Attributes:
        max_batch_sentences: the most sentences in one request (413 beyond).
        max_sentence_tokens: the most source tokens in one sentence (413 beyond); 0: the model's own limit,
            ``model.max_positions - 1``, which also caps any value given.
        timeout_s: a request not translated within this many seconds gets 504.
        window_s: how long the worker waits for more requests to batch with the first.
        batch_tokens: the most source tokens the worker gathers from several requests into one call.
        max_queue_sentences: the most sentences waiting for the worker (503 beyond).
        max_body_bytes: the most bytes in a request body (413 beyond; no more of it is read).
    """

    max_batch_sentences: int = 64
    max_sentence_tokens: int = 0
    timeout_s: float = 30.0
    window_s: float = 0.005
    batch_tokens: int = 6000
    max_queue_sentences: int = 2048
    max_body_bytes: int = 1_048_576


class BatchKey(NamedTuple):
    """What requests must share to be translated in one batch: the model and the search options."""

    model: str
    beam_size: int | None
    n_best: int
    detailed: bool


class Refusal(Exception):
    """A request the server answers with ``status`` and a one-line reason."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


def one_line(text: str) -> str:
    """``text`` with control characters, NUL and line or paragraph separators (CR, LF, U+2028, U+2029, U+0085)
    turned into spaces, so a sentence that holds one still gives exactly one output."""
    return LINE_BREAKS.sub(" ", text)


def token_limit(run: LoadedRun, limits: ServeLimits) -> int:
    """The most source tokens a sentence may have for ``run``: the flag's value, at most the model's limit."""
    model_limit = run.cfg.model.max_positions - 1
    return min(limits.max_sentence_tokens, model_limit) if limits.max_sentence_tokens > 0 else model_limit


def model_info(name: str, run: LoadedRun, limits: ServeLimits) -> ModelInfo:
    """The ``GET /v1/models`` entry of one served run."""
    return ModelInfo(name=name, family=run.cfg.model.family, methods=sorted(run.cfg.model.methods),
                     parameters=count_parameters(run.model), src_vocab_size=len(run.src_vocab),
                     tgt_vocab_size=len(run.tgt_vocab), max_sentence_tokens=token_limit(run, limits),
                     max_batch_sentences=limits.max_batch_sentences, beam_size=run.cfg.decode.beam_size)


def source_lengths(run: LoadedRun, texts: list[str]) -> list[int]:
    """Source tokens of each text as ``run`` encodes it (pieces, or lattice edges); a blank text has none."""
    labels = [f"text[{index}]" for index in range(len(texts))]
    encoded = SourceEncoder(run.src_vocab, run.lattice).encode(texts, labels)
    return [len(row.ids) if text.strip() else 0 for text, row in zip(texts, encoded)]


def check_request(request: TranslateRequest, runs: dict[str, LoadedRun], limits: ServeLimits) -> str:
    """The name of the model ``request`` asks for, after every check that needs no translation.

    Raises:
        Refusal: 404 for an unknown model, 413 over a limit, 422 for inconsistent options.
    """
    name = request.model if request.model is not None else next(iter(runs))
    if name not in runs:
        raise Refusal(404, f"unknown model {name!r}; this server has {', '.join(repr(n) for n in runs)}")
    if len(request.text) > limits.max_batch_sentences:
        raise Refusal(413, f"{len(request.text)} sentences in one request, more than the limit "
                           f"max_batch_sentences={limits.max_batch_sentences}")
    beam = request.beam_size if request.beam_size is not None else runs[name].cfg.decode.beam_size
    if request.n_best > beam:
        raise Refusal(422, f"n_best: {request.n_best} hypotheses from a beam of {beam}")
    if request.references is not None and len(request.references) != len(request.text):
        raise Refusal(422, f"references: {len(request.references)} given for {len(request.text)} sentences")
    check_characters("text", request.text)
    check_characters("references", request.references or [])
    return name


def check_characters(field: str, texts: Sequence[str]) -> None:
    """Refuse (422) the first of ``texts`` that holds a lone surrogate, naming it: no tokenizer takes one."""
    for index, text in enumerate(texts):
        if match := SURROGATE.search(text):
            raise Refusal(422, f"{field}[{index}]: U+{ord(match.group()):04X} is a lone surrogate, not a character")


def validation_reason(problem: Mapping[str, Any]) -> str:
    """``field.path: message`` of one of pydantic's validation errors."""
    where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body") or "body"
    return f"{where}: {problem.get('msg', 'invalid')}"


def check_lengths(lengths: Sequence[int], limit: int, field: str = "text", unit: str = "source tokens") -> None:
    """Refuse (413) the first sentence of ``field`` with more than ``limit`` tokens, naming it and the limit."""
    for index, length in enumerate(lengths):
        if length > limit:
            raise Refusal(413, f"{field}[{index}]: {length} {unit}, more than the limit "
                               f"max_sentence_tokens={limit}")


def reference_lengths(references: list[str]) -> list[int]:
    """The tokens of each reference that sentence RIBES aligns (sacreBLEU's 13a tokens)."""
    return [len(tokens.split()) for tokens in ribes_tokens(references, tokenized=False)]


def references_ribes(translations: list[str], references: list[str]) -> list[float]:
    """Sentence RIBES of each translation against its reference."""
    return [text_ribes(translation, reference) for translation, reference in zip(translations, references)]


def create_app(runs: dict[str, LoadedRun], limits: ServeLimits | None = None) -> FastAPI:
    """The server for ``runs`` (name -> loaded run; the first is the default model) under ``limits``."""
    if not runs:
        raise OrdoError("serve: no model to serve")
    limits = limits or ServeLimits()

    def run_batch(key: Hashable, texts: list[str]) -> list[TranslationDetail]:
        assert isinstance(key, BatchKey)
        decode: dict[str, Any] = {"nbest": key.n_best, "long_lines": "error"}
        if key.beam_size is not None:
            decode["beam_size"] = key.beam_size
        return runs[key.model].translate_detailed(texts, attention=key.detailed, **decode)

    batcher = MicroBatcher(run_batch, limits.window_s, limits.batch_tokens, limits.max_queue_sentences)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        yield
        batcher.stop()

    app = FastAPI(title="ordo serve", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Translation with the word-order data of ordo runs: attention, links, Kendall's tau.")

    @app.exception_handler(Refusal)
    async def refused(_: Request, err: Refusal) -> JSONResponse:
        return JSONResponse({"detail": err.detail}, status_code=err.status, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = err.errors()
        malformed = [p for p in problems if p.get("type") == "json_invalid"]
        if malformed:
            position = malformed[0].get("loc", ("body", "?"))[-1]
            reason = malformed[0].get("ctx", {}).get("error", "JSON decode error")
            return JSONResponse({"detail": f"malformed JSON: {reason} (character {position})"}, status_code=400)
        return JSONResponse({"detail": "; ".join(validation_reason(p) for p in problems)}, status_code=422)

    @app.post("/v1/translate", response_model=TranslateResponse, response_model_exclude_none=True,
              responses={400: {}, 404: {}, 413: {}, 422: {}, 503: {}, 504: {}})
    async def translate(request: TranslateRequest) -> TranslateResponse:
        """Translate ``text`` (one output per sentence) with one model; the optional parts on request."""
        name = check_request(request, runs, limits)
        texts = [one_line(text) for text in request.text]
        references = [one_line(reference) for reference in request.references or []]
        try:
            lengths = source_lengths(runs[name], texts)
        except OrdoError as err:
            raise Refusal(422, str(err)) from None
        check_lengths(lengths, token_limit(runs[name], limits))
        check_lengths(reference_lengths(references), token_limit(runs[name], limits), "references", "tokens")
        detailed = request.return_attention or request.return_alignment
        key = BatchKey(name, request.beam_size, request.n_best, detailed)
        try:
            details: list[TranslationDetail] = await batcher.submit(key, texts, sum(lengths), limits.timeout_s)
        except QueueFullError as err:
            raise Refusal(503, f"the server is busy: {err}", {"Retry-After": str(RETRY_AFTER_S)}) from None
        except TimeoutError as err:
            raise Refusal(504, f"{err} (the server's timeout)") from None
        except OrdoError as err:
            raise Refusal(422, str(err)) from None
        sentences = [sentence_result(d, request.return_attention, request.return_alignment) for d in details]
        if references:  # off the event loop: RIBES of long sentences takes seconds
            scores = await asyncio.to_thread(references_ribes, [d.translation for d in details], references)
            for sentence, score in zip(sentences, scores):
                sentence.ribes = score
        return TranslateResponse(model=name, translations=[d.translation for d in details], sentences=sentences)

    @app.get("/v1/models", response_model=list[ModelInfo])
    async def models() -> list[ModelInfo]:
        """The served models, the default first."""
        return [model_info(name, run, limits) for name, run in runs.items()]

    @app.get("/healthz", response_model=Health)
    async def health() -> Health:
        """Liveness: answers while the worker translates."""
        return Health(status="ok", models=list(runs), queued_sentences=batcher.queued_sentences)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(api_page(app.openapi()))

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit, max_body_bytes=limits.max_body_bytes)
    return app
