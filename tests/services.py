"""Throwaway PostgreSQL and Redis servers for the test session, on free local ports.

Found on PATH or in ``/usr/lib/postgresql/*/bin``; ``RELAYSTATE_PG_BIN`` names another
PostgreSQL bin folder. ``RELAYSTATE_TEST_POSTGRES`` / ``RELAYSTATE_TEST_REDIS`` point the
suite at servers that already run instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
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
def redis(port: int | None = None) -> Iterator[str]:
    """A new Redis server without persistence, on ``port`` (a free one if None; then
    ``RELAYSTATE_TEST_REDIS`` may name a server that already runs); yields its URL."""
    if port is None and os.environ.get("RELAYSTATE_TEST_REDIS"):
        yield os.environ["RELAYSTATE_TEST_REDIS"]
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise Unavailable("no redis-server on this machine")
    port = port or free_port()
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


class PgBouncer:
    """PgBouncer in transaction mode in front of one PostgreSQL server (what most fleets
    run): each transaction of a client may reach another server connection. Debian's
    ``pgbouncer`` package; run as the ``postgres`` user when the suite runs as root."""

    def __init__(self, server_url: str) -> None:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not Path(binary).exists():
            raise Unavailable("no pgbouncer on this machine (apt-get install pgbouncer)")
        parts = server_url.split("@", 1)[1].split("/", 1)[0]
        host, _, port = parts.rpartition(":")
        self.binary = binary
        self.base = Path(tempfile.mkdtemp(prefix="relaystate-pgbouncer-"))
        self.base.chmod(0o777)
        self.port = free_port()
        (self.base / "users.txt").write_text('"postgres" ""\n')
        (self.base / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir =\nauth_type = trust\nauth_file = {self.base}/users.txt\n"
            "pool_mode = transaction\nmax_client_conn = 500\ndefault_pool_size = 20\n"
            f"logfile = {self.base}/pgbouncer.log\npidfile = {self.base}/pgbouncer.pid\n"
            "ignore_startup_parameters = extra_float_digits\n"
        )
        for name in ("users.txt", "pgbouncer.ini"):
            (self.base / name).chmod(0o644)
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}?pooler=transaction"

    def start(self, timeout: float = 10.0) -> None:
        self.proc = subprocess.Popen(
            _as_postgres([self.binary, str(self.base / "pgbouncer.ini")]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            if time.monotonic() > deadline or self.proc.poll() is not None:
                log = self.base / "pgbouncer.log"
                raise Unavailable(
                    "pgbouncer did not start: " + (log.read_text()[-500:] if log.exists() else "")
                )
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def nginx_binary() -> str:
    """nginx from ``RELAYSTATE_NGINX``, PATH or ``/usr/sbin`` (Debian's package)."""
    explicit = os.environ.get("RELAYSTATE_NGINX")
    for candidate in (explicit, shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise Unavailable("no nginx binary (nginx on PATH or /usr/sbin/nginx) on this machine")


class Nginx:
    """A throwaway nginx, never the system service: its own prefix, configuration, pid file,
    logs and temporary files in a folder of its own, in the foreground under this process.

    ``http`` is what goes in the ``http`` block (upstreams and servers, such as a rendered
    ``deploy/nginx/relaystate.conf``). Each request is logged to ``access_log`` as
    ``msec method uri status upstream_addr "upstream_status" request_time``; when nginx asked
    several processes, the upstream fields list each (``503, 200``).
    """

    def __init__(self, http: str) -> None:
        self.binary = nginx_binary()
        self.base = Path(tempfile.mkdtemp(prefix="relaystate-nginx-"))
        self.base.chmod(0o755)  # run as root, its workers are ``nobody`` and write here
        self.conf = self.base / "nginx.conf"
        self.error_log = self.base / "error.log"
        self.access_log = self.base / "access.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.write(http)

    def _main(self, http: str) -> str:
        b = self.base
        temp = "\n".join(
            f"    {kind}_temp_path {b / kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        return f"""daemon off;
worker_processes 1;
pid {b / "nginx.pid"};
error_log {self.error_log} notice;
events {{ worker_connections 1024; }}
http {{
    log_format upstreams '$msec $request_method $uri $status $upstream_addr '
                         '"$upstream_status" $request_time';
    access_log {self.access_log} upstreams;
{temp}
{http}
}}
"""

    def write(self, http: str) -> None:
        """Write the configuration and have nginx check it (Unavailable if it is refused).
        ``@ACCESS_LOG@`` in ``http`` stands for this nginx's own access log."""
        http = http.replace("@ACCESS_LOG@", str(self.access_log))
        self.conf.write_text(self._main(http))
        found = subprocess.run(
            [self.binary, "-t", *self._where()], capture_output=True, text=True, check=False
        )
        if found.returncode != 0:
            raise Unavailable(f"nginx refuses its configuration: {found.stderr.strip()}")

    def _where(self) -> list[str]:
        return ["-p", f"{self.base}/", "-c", str(self.conf), "-e", str(self.error_log)]

    def start(self, port: int, timeout: float = 15.0) -> None:
        """Start it and wait until ``port`` (where its configuration listens) answers."""
        self.proc = subprocess.Popen(
            [self.binary, *self._where()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Unavailable(f"nginx did not start: {self._log_tail()}")
            time.sleep(0.05)

    def reload(self, http: str, timeout: float = 15.0) -> None:
        """New configuration, as ``nginx -s reload`` does (SIGHUP): new worker processes
        take new connections, the old ones finish the requests they have."""
        assert self.proc is not None, "nginx is not running"
        self.write(http)
        before = self._log().count("start worker process")
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while self._log().count("start worker process") <= before:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not reload: {self._log_tail()}")
            time.sleep(0.05)

    def _log(self) -> str:
        return self.error_log.read_text() if self.error_log.exists() else ""

    def _log_tail(self) -> str:
        return " | ".join(self._log().strip().splitlines()[-5:])

    def stop(self) -> None:
        """Graceful stop (SIGQUIT: finish the requests in hand), else killed."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
