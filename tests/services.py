"""Throwaway PostgreSQL and Redis servers for the test session, on free local ports.

Found on PATH or in ``/usr/lib/postgresql/*/bin``; ``RELAYSTATE_PG_BIN`` names another
PostgreSQL bin folder. ``RELAYSTATE_TEST_POSTGRES`` / ``RELAYSTATE_TEST_REDIS`` point the
suite at servers that already run instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


class Unavailable(RuntimeError):
    """The server cannot be started here; the message says why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin() -> Path:
    explicit = os.environ.get("RELAYSTATE_PG_BIN")
    candidates = [Path(explicit)] if explicit else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).parent)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise Unavailable("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")


def _as_postgres(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the ``postgres`` user then."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("runuser") is None:
        raise Unavailable("running as root without runuser to switch to the postgres user")
    return ["runuser", "-u", "postgres", "--", *cmd]


class PostgresCluster:
    """A throwaway PostgreSQL cluster that a test may stop and start again (an outage)."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.base = Path(tempfile.mkdtemp(prefix="relaystate-pg-"))
        self.base.chmod(0o755)
        self.data = self.base / "data"
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")
        self.port = free_port()
        subprocess.run(
            _as_postgres(
                [
                    str(self.bin / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                ]
            ),
            check=True,
            capture_output=True,
        )
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=300 "
            "-c fsync=on -c shared_buffers=64MB"
        )
        self._ctl("-o", options, "-l", str(self.data / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "stop")

    def remove(self) -> None:
        subprocess.run(
            _as_postgres(
                [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]
            ),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(self.base, ignore_errors=True)

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            capture_output=True,
        )


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A new PostgreSQL cluster; yields the URL of its ``postgres`` database."""
    if os.environ.get("RELAYSTATE_TEST_POSTGRES"):
        yield os.environ["RELAYSTATE_TEST_POSTGRES"]
        return
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.remove()


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A new Redis server without persistence; yields its URL."""
    if os.environ.get("RELAYSTATE_TEST_REDIS"):
        yield os.environ["RELAYSTATE_TEST_REDIS"]
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise Unavailable("no redis-server on this machine")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise Unavailable("redis-server did not start")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)
