"""The micro-batching queue alone, with a scripted translate function: batching, timeouts, a full queue."""

import asyncio
import threading
import time

import pytest

from ordo.serve.batching import MicroBatcher, QueueFullError


def echo_batches(calls: list[list[str]], delay: float = 0.0):
    def run(key, texts):
        calls.append(list(texts))
        time.sleep(delay)
        return [f"{key}:{text}" for text in texts]

    return run


def run_with(batcher: MicroBatcher, main):
    batcher.start()
    try:
        return asyncio.run(main())
    finally:
        batcher.stop()


def test_requests_arriving_together_are_translated_in_one_call_and_each_gets_its_own_results():
    calls: list[list[str]] = []
    batcher = MicroBatcher(echo_batches(calls), window_s=0.2, max_batch_tokens=1000)

    async def main():
        jobs = [batcher.submit("m", [f"s{i}a", f"s{i}b"], 2, timeout=30) for i in range(8)]
        return await asyncio.gather(*jobs)

    results = run_with(batcher, main)
    assert results == [[f"m:s{i}a", f"m:s{i}b"] for i in range(8)]
    assert len(calls) < 8 and sum(len(c) for c in calls) == 16


def test_a_batch_holds_one_key_and_keeps_to_the_token_budget():
    calls: list[list[str]] = []
    batcher = MicroBatcher(echo_batches(calls), window_s=0.2, max_batch_tokens=5)

    async def main():
        jobs = [batcher.submit(key, [f"{key}{i}"], 2, timeout=30) for i in range(4) for key in ("x", "y")]
        return await asyncio.gather(*jobs)

    results = run_with(batcher, main)
    assert sorted(r[0] for r in results) == sorted(f"{k}:{k}{i}" for i in range(4) for k in ("x", "y"))
    assert all(len({text[0] for text in call}) == 1 for call in calls)  # one key per call
    assert all(len(call) * 2 <= 5 for call in calls)


def test_a_request_over_its_timeout_fails_and_the_worker_goes_on_with_the_others():
    calls: list[list[str]] = []
    release = threading.Event()

    def slow_first(key, texts):
        calls.append(list(texts))
        if texts == ["slow"]:
            release.wait(10)
        return list(texts)

    batcher = MicroBatcher(slow_first, window_s=0.0)

    async def main():
        with pytest.raises(TimeoutError, match="within 0.2 s"):
            await batcher.submit("m", ["slow"], 1, timeout=0.2)
        release.set()
        return await batcher.submit("m", ["next"], 1, timeout=10)

    assert run_with(batcher, main) == ["next"]


def test_a_full_queue_refuses_and_an_error_reaches_only_its_request():
    started, release = threading.Event(), threading.Event()

    def run(key, texts):
        if "block" in texts:
            started.set()
            release.wait(10)
        if "bad" in texts:
            raise ValueError("bad sentence")
        return list(texts)

    batcher = MicroBatcher(run, window_s=0.0, max_queue_sentences=2)

    async def main():
        blocking = asyncio.ensure_future(batcher.submit("m", ["block"], 1, timeout=10))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        waiting = [asyncio.ensure_future(batcher.submit("m", [t], 1, timeout=10)) for t in ("ok", "bad")]
        await asyncio.sleep(0.05)
        assert batcher.queued_sentences == 2
        with pytest.raises(QueueFullError, match="queue holds 2"):
            await batcher.submit("m", ["more"], 1, timeout=10)
        release.set()
        return await asyncio.gather(blocking, *waiting, return_exceptions=True)

    block, ok, bad = run_with(batcher, main)
    assert block == ["block"] and ok == ["ok"]
    assert isinstance(bad, ValueError)
