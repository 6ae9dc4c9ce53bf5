"""``ordo serve``: the runs its ``--model`` flags name, the socket it listens on, and the server."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from ordo.errors import ConfigError


def _served_runs(specs: list[str]) -> list[tuple[str, Path]]:
    """``[NAME=]RUN`` flags as (name, run directory) pairs; a name given twice is an error. A flag that names an
    existing directory is a RUN, whatever ``=`` its path holds (``runs/lr=1e-3``)."""
    named = []
    for spec in specs:
        name, sep, run = ("", "", spec) if Path(spec).is_dir() else spec.partition("=")
        if sep and not (name and run):
            raise ConfigError(f"--model {spec}: expected RUN or NAME=RUN")
        named.append((name, Path(run)) if sep else (Path(spec).name or spec, Path(spec)))
    names = [name for name, _ in named]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--model: the name {twice[0]!r} is given twice (use NAME=RUN)")
    return named


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` for uvicorn, bound before the models load so that an address in use
    is an error at once.

    Raises:
        ConfigError: naming the address when it cannot be bound (in use, not this machine's, not permitted).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listener = socket.socket(family, kind, proto)
    except OSError as err:
        raise ConfigError(f"{host}:{port}: cannot listen ({err.strerror or err})") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
    except OSError as err:
        listener.close()
        raise ConfigError(f"{host}:{port}: cannot listen ({err.strerror or err})") from None
    return listener


def run_serve(args: argparse.Namespace) -> None:
    """``ordo serve``: load every ``--model`` once, then serve them with uvicorn until interrupted."""
    import logging

    from ordo.errors import import_extra

    import_extra("fastapi", "serve")
    uvicorn = import_extra("uvicorn", "serve")
    from ordo import api
    from ordo.serve.app import ServeLimits, create_app

    for flag, value in (("--max-batch-sentences", args.max_batch_sentences), ("--batch-tokens", args.batch_tokens),
                        ("--max-queue-sentences", args.max_queue_sentences), ("--timeout", args.timeout),
                        ("--max-body-bytes", args.max_body_bytes)):
        if value <= 0:
            raise ConfigError(f"{flag}: {value} must be positive")
    for flag, value in (("--max-sentence-tokens", args.max_sentence_tokens),
                        ("--batch-window-ms", args.batch_window_ms)):
        if value < 0:
            raise ConfigError(f"{flag}: {value:g} must be 0 or more")
    served = _served_runs(args.model)
    with _listening_socket(args.host, args.port) as listener:
        api.setup_logging()
        runs = {name: api.load_run(run, args.checkpoint, args.device, int8=args.int8) for name, run in served}
        limits = ServeLimits(args.max_batch_sentences, args.max_sentence_tokens, args.timeout,
                             args.batch_window_ms / 1000, args.batch_tokens, args.max_queue_sentences,
                             args.max_body_bytes)
        log = logging.getLogger("ordo.serve")
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("binding %s: the server is reachable from other machines, without authentication", args.host)
        log.info("serving %s on http://%s:%d/ (API: /docs)", ", ".join(runs), args.host, args.port)
        uvicorn.Server(uvicorn.Config(create_app(runs, limits), log_level="warning")).run(sockets=[listener])
