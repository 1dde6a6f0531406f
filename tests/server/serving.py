"""``relaystate serve`` as a real process, for the tests that kill or starve it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .. import services

NOW = "2026-11-29T10:00:00"


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
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited:\n{self.output()}"
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        pytest.fail(f"the server was not ready within 30 s:\n{self.output()}")

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
