"""What the browser tests share: Debian's Chromium driven by Playwright against a real
``relaystate serve`` process (restartable, on its own port and SQLite store).

Never ``playwright install``: only the system Chromium is used. Without it a test skips;
under ``CI=true`` it fails instead, so CI cannot pass by skipping.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NOW = "2026-11-29T10:00:00"  # "Dec 9" is then 2026-12-09
WAIT_MS = 10_000  # an expectation's patience; each normally holds within a second


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs the browser test to run: {reason}")
    pytest.skip(reason)


def need_a_browser() -> None:
    """Debian's Chromium and Playwright's Python package, or skip (fail under CI=true)."""
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        unavailable(f"playwright is not installed: {exc}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """``relaystate serve`` as a real process on a fixed port and store, restartable;
    ``args``: more options of ``serve`` (``--app``, ``--build``)."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store = f"sqlite:///{workdir / 'dash.db'}"
        self.ledger = workdir / "ledger.db"
        self.log = workdir / "server.log"
        self.env = {**os.environ, "RELAYSTATE_NOW": NOW, "PYTHONUNBUFFERED": "1"}
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    def cli(self, *args: str) -> str:
        cmd = [sys.executable, "-m", "relaystate.cli", *args]
        done = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def start(self) -> None:
        cmd = [sys.executable, "-m", "relaystate.cli", "serve", "--port", str(self.port)]
        cmd += ["--store", self.store, "--ledger", str(self.ledger), *self.args]
        with self.log.open("ab") as log:
            log.write(f"\n--- start {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.pids.append(self.proc.pid)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as answer:
                    if answer.status == 200 and json.load(answer) == {"status": "ok"}:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        pytest.fail(f"the server did not answer /healthz within 30 s:\n{self.output()}")

    def stop(self) -> None:
        """SIGTERM, as a supervisor restarting the service does; it must exit by itself."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(
                "the server did not exit within 15 s of SIGTERM (the dashboard holds an open "
                f"/v1/tasks/ID/events stream):\n{self.output()}"
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextmanager
def serving(workdir: Path, *args: str) -> Iterator[Server]:
    """A Server (not yet started) that is killed, if still running, when the block ends."""
    srv = Server(workdir, *args)
    try:
        yield srv
    finally:
        if srv.proc is not None:
            srv.proc.kill()
            srv.proc.wait()


def watched(page: Any) -> list[str]:
    """Give a Playwright page the tests' patience; the list it returns fills with the page's
    uncaught errors (a test ends asserting it is empty)."""
    from playwright.sync_api import expect

    page.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    crashes: list[str] = []
    page.on("pageerror", lambda err: crashes.append(str(err)))
    return crashes


_REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) =>
  window.__cspViolation(`${e.effectiveDirective} refused ${e.blockedURI || "inline"}`
    + ` (${e.sourceFile || "the page"}:${e.lineNumber})`));
"""


def csp_watched(page: Any) -> list[str]:
    """The list fills with every Content-Security-Policy violation of the page, from its
    ``securitypolicyviolation`` events and the console (a worker's too), from now on and
    across navigations; a test of a page that must run under its policy asserts it empty."""
    violations: list[str] = []
    page.expose_function("__cspViolation", lambda said: violations.append(f"event: {said}"))
    page.add_init_script(_REPORT_VIOLATIONS)

    def said(message: Any) -> None:
        if "Content Security Policy" in message.text:
            violations.append(f"console: {message.text}")

    page.on("console", said)
    return violations
