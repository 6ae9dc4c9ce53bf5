"""Throughput and latency of ``ordo serve`` under concurrent clients, beside ``ordo translate``'s offline
throughput on the same sentences in the same run.

First the run translates all the sentences in one call in this process (``LoadedRun.translate``, the path of
``ordo translate``: length-sorted batches of ``decode.max_tokens``): the offline sentences/s. Then ``ordo
serve`` starts as a subprocess on a free loopback port, and for each client count N, N asyncio clients (httpx)
each send requests of 1-5 sentences drawn from the set, one after another, for ``--seconds``; the table gives
sentences/s, its share of the offline figure, p50/p99 request latency, and the requests that did not get 200.
The numbers, the command line and the machine's load go to ``--out``.

usage: python bench/serve_load.py --model RUN_DIR --src SENTENCES [--checkpoint best] [--clients 1,8,32]
           [--seconds 20] [--out bench/results/serve_load.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import httpx
import numpy as np

from ordo.api import load_run
from ordo.data.textio import atomic_write, read_lines


@dataclass
class Load:
    """What N clients got in one timed period."""

    clients: int
    seconds: float = 0.0
    sentences: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: dict[int, int] = field(default_factory=dict)


def offline_speed(run_dir: str, checkpoint: str, sentences: list[str]) -> float:
    """Sentences/s of ``LoadedRun.translate`` on all ``sentences`` at once (after one warm-up batch)."""
    run = load_run(run_dir, checkpoint)
    run.translate(sentences[:16])
    start = time.perf_counter()
    run.translate(sentences)
    return len(sentences) / (time.perf_counter() - start)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(run_dir: str, checkpoint: str, port: int) -> subprocess.Popen:
    """``ordo serve`` on ``port``, once it answers ``/healthz``."""
    process = subprocess.Popen([sys.executable, "-m", "ordo", "serve", "--model", run_dir, "--checkpoint", checkpoint,
                                "--port", str(port)])
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("ordo serve did not start")
        time.sleep(0.2)


async def client(http: httpx.AsyncClient, pool: list[str], deadline: float, seed: int, load: Load) -> None:
    """Send requests of 1-5 sentences from ``pool`` until ``deadline``, recording each one in ``load``."""
    draw = random.Random(seed)
    while time.monotonic() < deadline:
        texts = draw.sample(pool, draw.randint(1, 5))
        start = time.perf_counter()
        reply = await http.post("/v1/translate", json={"text": texts})
        load.latencies.append(time.perf_counter() - start)
        if reply.status_code == 200:
            load.sentences += len(texts)
        else:
            load.errors[reply.status_code] = load.errors.get(reply.status_code, 0) + 1


async def measure(url: str, pool: list[str], clients: int, seconds: float) -> Load:
    """``clients`` concurrent clients for ``seconds`` (the requests under way at the end are waited for)."""
    load = Load(clients)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        start = time.monotonic()
        await asyncio.gather(*(client(http, pool, start + seconds, seed, load) for seed in range(clients)))
        load.seconds = time.monotonic() - start
    return load


def report(loads: list[Load], offline: float, sentences: int, command: str) -> str:
    """The Markdown page of the results."""
    rows = [f"| {load.clients} | {load.sentences / load.seconds:.1f} | {100 * load.sentences / load.seconds / offline:.0f}% "
            f"| {1000 * np.percentile(load.latencies, 50):.0f} | {1000 * np.percentile(load.latencies, 99):.0f} "
            f"| {len(load.latencies)} | {sum(load.errors.values())} {load.errors or ''} |" for load in loads]
    return "\n".join([
        "# ordo serve under load (bench/serve_load.py)", "",
        f"Command: `{command}`", "",
        (f"Machine: {os.cpu_count()} CPU cores, load average before the run {os.getloadavg()[0]:.2f} "
        "(other jobs may share the cores; the clients run on the same machine as the server)."), "",
        (f"Offline (`LoadedRun.translate`, the path of `ordo translate`, all {sentences} sentences in one call): "
        f"{offline:.1f} sentences/s."), "",
        "| clients | sentences/s | of offline | p50 ms | p99 ms | requests | not 200 |",
        "|---|---|---|---|---|---|---|", *rows, ""])


def main() -> None:
    """Measure and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="run directory")
    parser.add_argument("--src", required=True, help="sentences, one a line")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--clients", default="1,8,32", help="client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each client count runs")
    parser.add_argument("--out", default="bench/results/serve_load.md")
    args = parser.parse_args()
    pool = [line for line in read_lines(args.src) if line.strip()]
    offline = offline_speed(args.model, args.checkpoint, pool)
    print(f"offline: {offline:.1f} sentences/s", file=sys.stderr)
    port = free_port()
    server = start_server(args.model, args.checkpoint, port)
    try:
        loads = []
        for clients in (int(c) for c in args.clients.split(",")):
            loads.append(asyncio.run(measure(f"http://127.0.0.1:{port}", pool, clients, args.seconds)))
            print(f"{clients} clients: {loads[-1].sentences / loads[-1].seconds:.1f} sentences/s", file=sys.stderr)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    command = "python bench/serve_load.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    with atomic_write(args.out) as handle:
        handle.write(report(loads, offline, len(pool), command))
    print(f"-> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
