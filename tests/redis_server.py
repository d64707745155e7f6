"""A real redis-server on a free loopback port, for the Redis store tests (not collected).

In CI (``$CI`` set, as ``.ci/run`` does) a missing ``redis-server`` fails the tests that need
one; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def redis_server_binary() -> str:
    """The path of ``redis-server``; fails (in CI) or skips the test when there is none."""
    found = shutil.which("redis-server")
    if found is None:
        reason = "redis-server is not installed (apt-get install -y redis-server)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process with its own folder, which can be killed and started again.

    Args:
        folder: where its AOF (and nothing else) is written.
        appendonly: ``"yes"`` or ``"no"``.
        appendfsync: ``"always"``, ``"everysec"`` or ``"no"``.
    """

    def __init__(
        self, folder: Path, *, appendonly: str = "yes", appendfsync: str = "everysec"
    ) -> None:
        self.binary = redis_server_binary()
        self.folder = folder
        self.port = free_port()
        self.options = ["--appendonly", appendonly, "--appendfsync", appendfsync]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A client for a test's own checks and changes (it does not retry)."""
        return redis.Redis(host="127.0.0.1", port=self.port, retry=Retry(NoBackoff(), 0))

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--dir", str(self.folder), "--save", "", *self.options]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        with self.client() as client:
            while True:
                try:
                    client.ping()  # answers only once the AOF is loaded
                    return self
                except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise RuntimeError(f"redis-server did not start: {command}") from None
                    time.sleep(0.02)

    def stop(self, how: signal.Signals = signal.SIGTERM) -> None:
        """Stop the server (SIGKILL: a crash, nothing flushed beyond what fsync did)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(how)
            self.process.wait(timeout=10)
        self.process = None
