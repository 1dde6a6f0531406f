"""The processes of a rolling upgrade: ``relaystate serve`` and ``relaystate worker`` of
builds v1 and v2 (real subprocesses over one store), nginx in front of the API processes
(its configuration rendered from ``deploy/nginx/relaystate.conf``), and what the operator
reads (``relaystate builds``, ``workers``, ``migrate``). Shared by the test and the bench.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from relaystate import Runtime, Scope, open_store
from relaystate.server.api_keys import issue

from ..services import Nginx, free_port
from . import app_v1, app_v2

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "deploy" / "nginx" / "relaystate.conf"
ACCESS_LOG = "@ACCESS_LOG@"
"""Where the sample's log goes in a test: the throwaway nginx's own access log."""
APPS = {"v1": "tests.upgrade.app_v1:templates", "v2": "tests.upgrade.app_v2:templates"}
API_GRACE = 3.0
"""Seconds a stopping ``relaystate serve`` gives requests in flight (cli/serve.py GRACE)."""


def templates(build: str) -> Any:
    return (app_v1 if build == "v1" else app_v2).templates()


def render(listen: int, upstreams: list[int]) -> str:
    """The sample nginx configuration with this listen port and these API ports (every
    other line as shipped, so the test runs the sample itself)."""
    text = SAMPLE.read_text()
    block = re.search(r"upstream relaystate_api \{\n(.*?)\n\}", text, re.S)
    assert block is not None, "the sample has no upstream relaystate_api block"
    server = re.search(r"server 127\.0\.0\.1:\d+(.*);", block.group(1))
    assert server is not None, "the sample's upstream names no server"
    lines = "\n".join(f"    server 127.0.0.1:{p}{server.group(1)};" for p in upstreams)
    text = text[: block.start(1)] + lines + text[block.end(1) :]
    text, n = re.subn(r"listen \d+;", f"listen 127.0.0.1:{listen};", text)
    assert n == 1, "the sample has no single listen line"
    text, n = re.subn(r"access_log \S+ relaystate;", f"access_log {ACCESS_LOG} relaystate;", text)
    assert n == 1, "the sample has no single access_log line of its own format"
    return text


@dataclass
class Proc:
    """One API or worker process, with when it was told to stop and when it exited."""

    name: str
    role: str
    build: str
    popen: subprocess.Popen[bytes]
    log: Path
    grace: float
    port: int | None = None
    started: float = field(default_factory=time.monotonic)
    term_at: float | None = None
    exited_at: float | None = None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def terminate(self) -> None:
        self.term_at = time.monotonic()
        self.popen.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> float | None:
        """Seconds from SIGTERM to exit (None: still running after ``timeout``)."""
        assert self.term_at is not None
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.exited_at = time.monotonic()
        return self.exited_at - self.term_at

    @property
    def stop_seconds(self) -> float | None:
        if self.term_at is None or self.exited_at is None:
            return None
        return self.exited_at - self.term_at

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Fleet:
    """Starts and stops the processes of both builds over ``store``."""

    def __init__(
        self,
        store: str,
        base: Path,
        *,
        action_seconds: str = "0.3:1.5",
        lease: float = 10.0,
        worker_grace: float = 20.0,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.store = store
        self.base = base
        self.ledger = base / "ledger.db"
        self.action_seconds = action_seconds
        self.lease = lease
        self.worker_grace = worker_grace
        self.extra_env = dict(extra_env or {})
        self.procs: list[Proc] = []
        self.nginx: Nginx | None = None
        self.port = 0
        self.keys: dict[str, str] = {}
        """User -> API key (``prepare``)."""

    # -- the store and its keys -----------------------------------------------------------
    def prepare(self, users: list[str]) -> dict[str, str]:
        """Create the store's schema (once, before any process races to) and one API key
        per user; returns user -> key."""
        keys = {}
        with Runtime(open_store(self.store), templates("v1")) as rt:
            for user in users:
                _, secret = issue(
                    rt, Scope.admin("test"), user, name=user, admin=False, now=rt.clock()
                )
                keys[user] = secret
        self.keys.update(keys)
        return keys

    # -- processes ------------------------------------------------------------------------
    def env(self, build: str) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "RELAYSTATE_LEDGER": str(self.ledger),
            "RELAYSTATE_BUILD": build,
            "UPGRADE_ACTION_SECONDS": self.action_seconds,
            **self.extra_env,
        }

    def _spawn(self, name: str, role: str, build: str, args: list[str], grace: float) -> Proc:
        log = self.base / f"{name}.log"
        cmd = [sys.executable, "-m", "relaystate.cli", *args]
        cmd += ["--store", self.store, "--app", APPS[build], "--build", build]
        with log.open("wb") as out:
            popen = subprocess.Popen(
                cmd, cwd=ROOT, env=self.env(build), stdout=out, stderr=subprocess.STDOUT
            )
        proc = Proc(name, role, build, popen, log, grace)
        self.procs.append(proc)
        return proc

    def api(self, build: str, name: str) -> Proc:
        port = free_port()
        args = ["serve", "--port", str(port), "--execute", "queue", "--rate", "100000"]
        proc = self._spawn(name, "api", build, args, API_GRACE)
        proc.port = port
        return proc

    def worker(self, build: str, name: str, *, batch: int = 2) -> Proc:
        args = ["worker", "--lease", str(self.lease), "--grace", str(self.worker_grace)]
        args += ["--batch", str(batch)]
        return self._spawn(name, "worker", build, args, self.worker_grace)

    def ready(self, *procs: Proc, timeout: float = 90.0) -> None:
        """Wait until each API process answers /healthz and each worker says it waits."""
        deadline = time.monotonic() + timeout
        for proc in procs:
            while not self._is_ready(proc):
                if proc.returncode is not None:
                    raise RuntimeError(f"{proc.name} exited {proc.returncode}:\n{proc.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{proc.name} is not ready:\n{proc.tail()}")
                time.sleep(0.1)

    def _is_ready(self, proc: Proc) -> bool:
        if proc.role == "worker":
            return proc.log.exists() and b"waiting for work" in proc.log.read_bytes()
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"http://127.0.0.1:{proc.port}/healthz", timeout=1).status_code == 200
        return False

    def stop(self, proc: Proc, *, slack: float = 5.0) -> float | None:
        """SIGTERM and wait up to its grace period plus ``slack``; seconds it took."""
        proc.terminate()
        return proc.wait(proc.grace + slack)

    def live(self, role: str | None = None, build: str | None = None) -> list[Proc]:
        return [
            p
            for p in self.procs
            if p.term_at is None
            and (role is None or p.role == role)
            and (build is None or p.build == build)
        ]

    # -- nginx ----------------------------------------------------------------------------
    def balance(self, apis: list[Proc]) -> None:
        """Point nginx at these API processes: start it, or reload it under load."""
        ports = [p.port for p in apis if p.port is not None]
        if self.nginx is None:
            self.port = free_port()
            self.nginx = Nginx(render(self.port, ports))
            self.nginx.start(self.port)
        else:
            self.nginx.reload(render(self.port, ports))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- what the operator runs -------------------------------------------------------------
    def cli(self, *args: str, build: str = "v2", app: bool = False) -> Any:
        """A ``relaystate`` command with ``--json``; its parsed output."""
        cmd = [sys.executable, "-m", "relaystate.cli", *args, "--store", self.store, "--json"]
        if app:
            cmd += ["--app", APPS[build], "--build", build]
        done = subprocess.run(
            cmd, cwd=ROOT, env=self.env(build), capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr}")
        return json.loads(done.stdout)

    def builds(self) -> dict[str, dict[str, Any]]:
        return {row["build"]: row for row in self.cli("builds")}

    def close(self) -> None:
        """Kill whatever still runs (a failed test), then nginx."""
        for proc in self.procs:
            if proc.returncode is None:
                proc.popen.kill()
                proc.popen.wait()
        if self.nginx is not None:
            self.nginx.remove()


@dataclass
class Proxied:
    """One request as nginx logged it: every process it asked, and what each answered."""

    at: float
    method: str
    uri: str
    status: int
    upstreams: list[str]
    answers: list[str]
    seconds: float

    @property
    def retried(self) -> bool:
        return len(self.upstreams) > 1


def access_log(path: Path) -> list[Proxied]:
    """Parse the access log of :class:`tests.services.Nginx`."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"(\S+) (\S+) (\S+) (\d+) (.*) \"(.*)\" (\S+)", line)
        if m is None:
            continue
        ups = [u.strip() for u in re.split(r"[,:]\s(?=\d)", m.group(5))] if m.group(5) else []
        answers = [a.strip() for a in m.group(6).split(",") if a.strip()]
        out.append(
            Proxied(
                float(m.group(1)),
                m.group(2),
                m.group(3),
                int(m.group(4)),
                ups,
                answers,
                float(m.group(7)),
            )
        )
    return out
