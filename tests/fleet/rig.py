"""A fleet on one machine: hosts as Linux network namespaces, PostgreSQL as a primary with a
synchronous standby under pg_auto_failover, nginx in front of the API hosts.

The namespaces hang off a bridge of their own (addresses 10.88.0.0/24 only, made and removed
by the rig); the database nodes and nginx live in the machine's own namespace, at the
bridge's address. A host is cut from everything (``partition``) by taking its link down and
joined again by bringing it up. Every process is started in a session of its own, so that a
"host failure" kills the whole process tree with SIGKILL. Needs root (namespaces) and
Debian's ``postgresql-15-auto-failover``, ``nginx`` and ``faketime``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from .. import services

NET = "10.88.0"
GATEWAY = f"{NET}.1"
BRIDGE = "rsbr0"
REPO = Path(__file__).resolve().parents[2]
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
MONITOR_SETTINGS = {
    "health_check_period": 1000,
    "health_check_timeout": 1000,
    "health_check_max_retries": 1,
    "health_check_retry_delay": 500,
    "node_considered_unhealthy_timeout": 5000,
    "primary_demote_timeout": 5000,
}
"""How soon the monitor calls a silent primary dead and promotes the standby (ms;
pg_auto_failover's defaults add up to about 50 s, made for WANs): a LAN's figures, as the
torture report states. A shorter demote timeout is safe here: with synchronous replication
an old primary that still runs cannot commit once its standby stopped replicating."""


def missing() -> str | None:
    """Why the rig cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "the fleet rig makes network namespaces: it needs root"
    for tool in ("ip", "pg_autoctl", "runuser"):
        if shutil.which(tool) is None:
            return f"no {tool} on this machine (apt-get install postgresql-15-auto-failover)"
    if not Path(FAKETIME).exists():
        return "no libfaketime (apt-get install faketime)"
    try:
        services.nginx_binary()
    except services.Unavailable as exc:
        return str(exc)
    return None


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


class Host:
    """One machine of the fleet: a network namespace with one address on the bridge."""

    def __init__(self, name: str, number: int) -> None:
        self.name, self.ns, self.ip = name, f"rs-{name}", f"{NET}.{10 + number}"
        self.link = f"rsv{number}"
        with contextlib.suppress(subprocess.CalledProcessError):
            _sh("ip", "netns", "del", self.ns)
        _sh("ip", "netns", "add", self.ns)
        _sh(
            "ip", "link", "add", self.link, "type", "veth", "peer", "name", "eth0", "netns", self.ns
        )
        _sh("ip", "link", "set", self.link, "master", BRIDGE, "up")
        _sh("ip", "-n", self.ns, "addr", "add", f"{self.ip}/24", "dev", "eth0")
        _sh("ip", "-n", self.ns, "link", "set", "eth0", "up")
        _sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        self.procs: list[subprocess.Popen[bytes]] = []

    def run(
        self, args: list[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                # a network namespace, and a host name of its own (a lease holder on
                # another host is judged by time, not by its process id)
                [
                    "ip",
                    "netns",
                    "exec",
                    self.ns,
                    "unshare",
                    "--uts",
                    "--",
                    "sh",
                    "-c",
                    'hostname "$0" && exec "$@"',
                    self.name,
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=REPO,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def partition(self) -> None:
        _sh("ip", "link", "set", self.link, "down")

    def heal(self) -> None:
        _sh("ip", "link", "set", self.link, "up")

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
        self.procs = [p for p in self.procs if p.poll() is None]

    def remove(self) -> None:
        self.kill_all()
        with contextlib.suppress(subprocess.CalledProcessError):
            _sh("ip", "link", "del", self.link)
        with contextlib.suppress(subprocess.CalledProcessError):
            _sh("ip", "netns", "del", self.ns)


class Network:
    def __init__(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            _sh("ip", "link", "del", BRIDGE)
        _sh("ip", "link", "add", BRIDGE, "type", "bridge")
        _sh("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _sh("ip", "link", "set", BRIDGE, "up")
        self.hosts: list[Host] = []

    def host(self, name: str) -> Host:
        host = Host(name, len(self.hosts) + 1)
        self.hosts.append(host)
        return host

    def remove(self) -> None:
        for host in self.hosts:
            host.remove()
        with contextlib.suppress(subprocess.CalledProcessError):
            _sh("ip", "link", "del", BRIDGE)


class Node:
    """One PostgreSQL node kept by its pg_autoctl keeper (a machine of the database)."""

    def __init__(self, base: Path, name: str, port: int) -> None:
        self.name, self.port, self.data = name, port, base / name
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = base / f"{name}.log"

    def run(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    "pg_autoctl",
                    "run",
                    "--pgdata",
                    str(self.data),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """The machine fails: keeper and server die at once, without a word."""
        pid_file = self.data / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0]) if pid_file.exists() else None
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(15)
        if postmaster is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(postmaster), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(postmaster, signal.SIGKILL)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{GATEWAY}:{self.port}/{database}?connect_timeout=2"

    def is_primary(self) -> bool:
        try:
            with psycopg.connect(self.url(), autocommit=True) as conn:
                row = conn.execute("SELECT NOT pg_is_in_recovery()").fetchone()
        except psycopg.OperationalError:
            return False
        return bool(row and row[0])


class Formation:
    """A monitor and two nodes: a primary and its synchronous standby, failing over alone."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="relaystate-formation-"))
        self.base.chmod(0o777)
        shutil.chown(self.base, "postgres", "postgres")
        self.monitor_port = services.free_port()
        self.monitor = Node(self.base, "monitor", self.monitor_port)
        self.nodes = [Node(self.base, f"node{i}", services.free_port()) for i in (1, 2)]

    def _autoctl(self, *args: str) -> None:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", "pg_autoctl", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PG_CONFIG": "/usr/lib/postgresql/15/bin/pg_config"},
        )
        if done.returncode:
            raise services.Unavailable(f"pg_autoctl {args[0]} {args[1]}: {done.stderr[-1500:]}")

    def start(self) -> None:
        common = ("--hostname", GATEWAY, "--auth", "trust", "--no-ssl")
        self._autoctl(
            "create", "monitor", "--pgdata", str(self.monitor.data),
            "--pgport", str(self.monitor_port), *common,
        )  # fmt: skip
        _trust_bridge(self.monitor.data)
        self.monitor.run()
        self._wait_for(self._monitor_up, "the monitor")
        with psycopg.connect(self.monitor.url("pg_auto_failover"), autocommit=True) as conn:
            for name, value in MONITOR_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET pgautofailover.{name} = {value}")
            conn.execute("SELECT pg_reload_conf()")
        monitor = f"postgres://autoctl_node@{GATEWAY}:{self.monitor_port}/pg_auto_failover"
        for node in self.nodes:
            self._wait_for(lambda: self._monitor_up(), "the monitor")
            self._autoctl(
                "create", "postgres", "--pgdata", str(node.data), "--pgport", str(node.port),
                *common, "--monitor", monitor + "?sslmode=disable",
            )  # fmt: skip
            _trust_bridge(node.data)
            node.run()
            self._wait_for(
                lambda n=node: self._state(n.name) in ("single", "primary", "secondary"), node.name
            )
        self._wait_for(self.settled, "primary and secondary")

    def _monitor_up(self) -> bool:
        try:
            psycopg.connect(self.monitor.url("pg_auto_failover"), autocommit=True).close()
        except psycopg.OperationalError:
            return False
        return True

    def _states(self) -> dict[str, tuple[str, str]]:
        try:
            with psycopg.connect(self.monitor.url("pg_auto_failover"), autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node"
                ).fetchall()
        except psycopg.OperationalError:
            return {}
        return {str(name): (str(reported), str(goal)) for name, reported, goal in rows}

    def _state(self, node: str) -> str | None:
        found = [s for name, s in self._states().items() if name.endswith(node[-1])]
        return found[0][0] if found and found[0][0] == found[0][1] else None

    def settled(self) -> bool:
        """One primary and one secondary, as the monitor assigned them."""
        states = sorted(r for r, g in self._states().values() if r == g)
        return states == ["primary", "secondary"]

    def _wait_for(self, ready: object, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not ready():  # type: ignore[operator]
            if time.monotonic() > deadline:
                logs = "".join(
                    n.log.read_text()[-1500:] for n in [self.monitor, *self.nodes] if n.log.exists()
                )
                raise services.Unavailable(f"pg_auto_failover: {what} not ready: {logs}")
            time.sleep(0.3)

    def primary(self) -> Node | None:
        found = [n for n in self.nodes if n.is_primary()]
        return found[0] if len(found) == 1 else None

    def url(self, database: str) -> str:
        hosts = ",".join(f"{GATEWAY}:{n.port}" for n in self.nodes)
        return (
            f"postgresql://postgres@{hosts}/{database}"
            "?target_session_attrs=read-write&connect_timeout=2"
        )

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def wait_settled(self, timeout: float = 120) -> None:
        self._wait_for(self.settled, "a settled formation", timeout)

    def remove(self) -> None:
        for node in [*self.nodes, self.monitor]:
            with contextlib.suppress(Exception):
                node.kill()
        shutil.rmtree(self.base, ignore_errors=True)


def _trust_bridge(data: Path) -> None:
    """The fleet's hosts may connect (and replicate: the standby reaches the primary there)."""
    hba = data / "pg_hba.conf"
    if not hba.exists():
        return  # a standby made from the primary's base backup: it has the primary's lines
    lines = f"host all all {NET}.0/24 trust\nhost replication all {NET}.0/24 trust\n"
    if lines not in hba.read_text():
        with open(hba, "a") as f:
            f.write(lines)


def relaystate(*args: str) -> list[str]:
    return [sys.executable, "-m", "relaystate.cli", *args]


def skewed(seconds: int) -> dict[str, str]:
    """The environment of a process whose clock runs ``seconds`` off (libfaketime)."""
    return {"LD_PRELOAD": FAKETIME, "FAKETIME": f"{seconds:+d}s", "FAKETIME_NO_CACHE": "1"}
