"""``relaystate serve`` as a real process, for the tests that kill or starve it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from .. import services

NOW = "2026-11-29T10:00:00"


def wait_ready(
    proc: subprocess.Popen[bytes], url: str, output: Callable[[], str], what: str
) -> None:
    """Until ``url``'s /readyz answers 200 (30 s at most); fails at once if ``proc`` exits."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what} exited:\n{output()}"
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{what} was not ready within 30 s:\n{output()}")


class Server:
    """``relaystate serve`` as a real process over ``store``, its output in a log file."""

    def __init__(self, store: str, workdir: Path, *, env: dict[str, str] | None = None) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store, self.ledger = store, workdir / "ledger.db"
        self.log = workdir / "server.log"
        self.env = {**os.environ, "RELAYSTATE_NOW": NOW, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str) -> str:
        cmd = [sys.executable, "-m", "relaystate.cli", *args, "--store", self.store]
        done = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def start(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "relaystate.cli", "serve", "--port", str(self.port)]
        cmd += ["--store", self.store, "--ledger", str(self.ledger), *args]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        wait_ready(self.proc, self.url, self.output, "the server")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""
