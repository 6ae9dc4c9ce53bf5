"""Micro-batching: requests that arrive together are translated together, on one worker thread.

Each request becomes a :class:`Job` in a queue. The worker takes the oldest job, waits up to ``window_s`` for
more (or until the token budget is full), and translates every waiting job with the same key (model and search
options), oldest first, up to ``max_batch_tokens`` source tokens, as one call; the job that opened the batch
always goes in. The event loop only waits on futures, so the server answers other requests (``/healthz``)
while the worker translates. A job whose client gave up (timeout) is dropped if it has not started; if it has,
its results are thrown away and the worker goes on with the others. When a batch of several jobs fails, each
job is run alone, so an error reaches only the request that caused it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ordo.errors import OrdoError

RunBatch = Callable[[Hashable, list[str]], Sequence[Any]]  # (key, texts) -> one result per text, in order


class QueueFullError(OrdoError):
    """More sentences are waiting than the queue holds; the client should retry later."""


@dataclass
class Job:
    """One request's sentences, waiting for the worker."""

    key: Hashable
    texts: list[str]
    tokens: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[Any]]
    abandoned: bool = field(default=False)

    def resolve(self, results: Sequence[Any] | BaseException) -> None:
        """Hand ``results`` (or an error) to the waiting request, from any thread; ignored once it gave up."""
        self.loop.call_soon_threadsafe(self._set, results)

    def _set(self, results: Sequence[Any] | BaseException) -> None:
        if self.future.done():
            return
        if isinstance(results, BaseException):
            self.future.set_exception(results)
        else:
            self.future.set_result(list(results))


class MicroBatcher:
    """A queue of jobs and the worker thread that translates them in batches.

    Args:
        run_batch: translates the texts of one batch, all with the same key.
        window_s: how long the worker waits for more jobs after the first one arrives.
        max_batch_tokens: the most source tokens a batch gathers from several jobs.
        max_queue_sentences: the most sentences waiting; :meth:`submit` refuses a job beyond it.
    """

    def __init__(self, run_batch: RunBatch, window_s: float = 0.005, max_batch_tokens: int = 6000,
                 max_queue_sentences: int = 1024) -> None:
        self.run_batch = run_batch
        self.window_s = window_s
        self.max_batch_tokens = max_batch_tokens
        self.max_queue_sentences = max_queue_sentences
        self._pending: list[Job] = []
        self._arrived: list[float] = []
        self._condition = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._work, name="ordo-serve-worker", daemon=True)

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the worker after its current batch; jobs still waiting fail."""
        with self._condition:
            self._stopped = True
            self._condition.notify_all()
        self._thread.join(timeout=30)
        for job in self._pending:
            job.resolve(QueueFullError("the server is shutting down"))
        self._pending.clear()

    @property
    def queued_sentences(self) -> int:
        """Sentences waiting for the worker (not counting the batch it is translating)."""
        with self._condition:
            return sum(len(job.texts) for job in self._pending)

    async def submit(self, key: Hashable, texts: list[str], tokens: int, timeout: float) -> list[Any]:
        """Translate ``texts`` (``tokens`` source tokens in all) with the jobs of the same ``key`` around them.

        Raises:
            QueueFullError: when the queue already holds ``max_queue_sentences`` sentences.
            TimeoutError: when the results are not there within ``timeout`` seconds (the job is dropped).
        """
        loop = asyncio.get_running_loop()
        job = Job(key, texts, tokens, loop, loop.create_future())
        with self._condition:
            waiting = sum(len(j.texts) for j in self._pending)
            if self._pending and waiting + len(texts) > self.max_queue_sentences:
                raise QueueFullError(f"{waiting} sentences are waiting (the queue holds {self.max_queue_sentences})")
            self._pending.append(job)
            self._arrived.append(time.monotonic())
            self._condition.notify_all()
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except asyncio.TimeoutError:
            self._abandon(job)
            raise TimeoutError(f"not translated within {timeout:g} s") from None

    def _abandon(self, job: Job) -> None:
        """Drop ``job`` from the queue if it is still there; results that come later are ignored."""
        with self._condition:
            job.abandoned = True
            if job in self._pending:
                index = self._pending.index(job)
                del self._pending[index], self._arrived[index]

    def _take_batch(self) -> list[Job] | None:
        """Wait for a batch of jobs (None when stopped): the oldest job and those of its key that fit."""
        with self._condition:
            while not self._pending and not self._stopped:
                self._condition.wait()
            if self._stopped:
                return None
            deadline = self._arrived[0] + self.window_s
            while (remaining := deadline - time.monotonic()) > 0 and self._pending:
                if sum(j.tokens for j in self._pending if j.key == self._pending[0].key) >= self.max_batch_tokens:
                    break
                self._condition.wait(remaining)
            if not self._pending:
                return []
            first = self._pending[0]
            batch: list[Job] = []
            tokens = 0
            for job in list(self._pending):
                if job.key == first.key and (not batch or tokens + job.tokens <= self.max_batch_tokens):
                    batch.append(job)
                    tokens += job.tokens
            for job in batch:
                index = self._pending.index(job)
                del self._pending[index], self._arrived[index]
            return batch

    def _work(self) -> None:
        """The worker thread's loop."""
        while (batch := self._take_batch()) is not None:
            live = [job for job in batch if not job.abandoned]
            if live:
                self._run(live)

    def _run(self, jobs: list[Job]) -> None:
        """Translate ``jobs`` as one call and hand each its results; on an error, each job alone."""
        texts = [text for job in jobs for text in job.texts]
        try:
            results = self.run_batch(jobs[0].key, texts)
        except Exception as err:  # noqa: BLE001 -- any failure goes back to the requests, never ends the worker
            if len(jobs) == 1:
                jobs[0].resolve(err)
                return
            for job in jobs:
                self._run([job])
            return
        start = 0
        for job in jobs:
            job.resolve(results[start:start + len(job.texts)])
            start += len(job.texts)
