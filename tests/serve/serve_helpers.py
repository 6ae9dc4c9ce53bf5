"""A served app on a free loopback port, for the tests that need real concurrent connections."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

uvicorn = pytest.importorskip("uvicorn", reason="ordo[serve] is not installed")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def live_server(app) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread; yields its base URL and stops it afterwards."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
