"""``relaystate serve --workers N``: N processes answer on one port, a SIGKILLed one is
replaced, and SIGTERM stops them all cleanly. Real processes over a real PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from relaystate import Runtime, Scope, open_store

from .serving import Server

ADMIN = Scope.admin("test")


def api_pids(store: str) -> set[int]:
    """The server processes registered (and not stopped) in the store."""
    rt = Runtime(open_store(store), [])
    try:
        return {w.info.pid for w in rt.workers(ADMIN) if w.role == "api"}
    finally:
        rt.close()


def wait_for(check: object, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_several_worker_processes_serve_one_port(postgres_url: str, tmp_path: Path) -> None:
    server = Server(postgres_url, tmp_path)
    key = json.loads(server.cli("users", "create", "alice", "--json"))["api_key"]
    server.start("--workers", "2", "--rate", "1000")
    assert server.proc is not None
    try:
        wait_for(lambda: len(api_pids(postgres_url)) == 2, "two workers registered")
        first = api_pids(postgres_url)
        assert server.proc.pid not in first  # the parent only supervises
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=20) as api:
            for n in range(6):
                answer = api.post(f"/v1/sessions/s{n}/messages", json={"text": "hello"})
                assert answer.status_code == 200, answer.text

            victim = min(first)
            os.kill(victim, signal.SIGKILL)
            wait_for(
                lambda: len(api_pids(postgres_url) - {victim}) == 2,
                "a new worker replaced the killed one",
            )
            answer = api.post("/v1/sessions/s-after/messages", json={"text": "hello"})
            assert answer.status_code == 200, answer.text
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 0, server.output()
        assert api_pids(postgres_url) == {victim}  # the killed one never deregistered
    finally:
        server.stop()


@pytest.mark.parametrize("bad", ["0", "many", "65"])
def test_a_bad_worker_count_is_one_clear_error(bad: str, tmp_path: Path) -> None:
    server = Server(f"sqlite:///{tmp_path}/s.db", tmp_path)
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "relaystate.cli", "serve", "--workers", bad],
        capture_output=True,
        text=True,
        timeout=60,
        env=server.env,
        check=False,
    )
    assert done.returncode == 2 and "workers is 1 to 64" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
