"""The JSON bodies of ``ordo serve``'s API (pydantic models, which FastAPI validates and documents)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from ordo.detail import TranslationDetail


class TranslateRequest(BaseModel):
    """``POST /v1/translate``: sentences to translate with one model; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: StrictStr | None = Field(default=None, description="a name from GET /v1/models; default: the first model")
    text: list[StrictStr] = Field(..., min_length=1, description="sentences, one output each (blank: empty)")
    beam_size: StrictInt | None = Field(default=None, ge=1, le=32, description="1: greedy; default: the run's")
    n_best: StrictInt = Field(1, ge=1, le=32, description="hypotheses returned per sentence, at most beam_size")
    return_attention: StrictBool = Field(False, description="attention matrices (target x source pieces)")
    return_alignment: StrictBool = Field(False, description="word links, Kendall's tau, source in target order")
    references: list[StrictStr] | None = Field(default=None, description="one reference per sentence: sentence RIBES")


class Candidate(BaseModel):
    """One hypothesis of an n-best list."""

    text: str
    score: float


class SentenceResult(BaseModel):
    """One sentence's translation; the optional parts are there when the request asked for them."""

    translation: str
    score: float
    n_best: list[Candidate]
    source_tokens: list[str]
    target_tokens: list[str]
    attention: list[list[float]] | None = Field(default=None, description="one row per target token, one column per "
                                                                   "source token; last decoder layer, mean of heads")
    source_units: list[str] | None = None
    target_units: list[str] | None = None
    links: list[tuple[int, int]] | None = Field(default=None, description="(source unit, target unit), 0-based")
    tau: float | None = Field(default=None, description="Kendall's tau of the links, in [-1, 1]")
    source_in_target_order: list[str] | None = None
    predicted_positions: list[float] | None = Field(default=None, description="ExGRE/ReFSR: target-order position of "
                                                                       "every source token")
    ribes: float | None = Field(default=None, description="sentence RIBES against the reference given")


class TranslateResponse(BaseModel):
    """The answer to ``POST /v1/translate``: one result per input sentence, in order."""

    model_config = ConfigDict(protected_namespaces=())

    model: str
    translations: list[str]
    sentences: list[SentenceResult]


class ModelInfo(BaseModel):
    """One served model (``GET /v1/models``)."""

    name: str
    family: str
    methods: list[str]
    parameters: int
    src_vocab_size: int
    tgt_vocab_size: int
    max_sentence_tokens: int
    max_batch_sentences: int = Field(description="the most sentences one request may hold (413 beyond)")
    beam_size: int


class Health(BaseModel):
    """``GET /healthz``."""

    status: str
    models: list[str]
    queued_sentences: int


def sentence_result(detail: TranslationDetail, attention: bool, alignment: bool) -> SentenceResult:
    """The JSON form of a :class:`~ordo.detail.TranslationDetail`, with the parts the request asked for."""
    result = SentenceResult(
        translation=detail.translation, score=detail.score,
        n_best=[Candidate(text=c.text, score=c.score) for c in detail.nbest],
        source_tokens=detail.source_tokens, target_tokens=detail.target_tokens,
        predicted_positions=detail.predicted_positions, ribes=detail.ribes,
    )
    if attention and detail.attention is not None:
        result.attention = [[round(float(w), 5) for w in row] for row in detail.attention]
    if alignment:
        result.source_units, result.target_units = detail.source_units, detail.target_units
        result.links, result.tau = detail.links, detail.tau
        result.source_in_target_order = detail.source_in_target_order
    return result
