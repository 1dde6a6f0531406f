"""``make torture``: a fleet of API and worker hosts over a replicated PostgreSQL, under load,
through failover, partitions, clock skew and killed processes; then the history checker.

Hosts are network namespaces (tests/fleet/rig.py); 20 users pay each other through nginx
(multi-turn: the request, then "yes"; the payment is a slow, non-idempotent Action run by
the worker hosts). Every client keeps its request key across retries, as the client
library does. Faults, one after another while the load runs:

- the primary's machine dies (keeper and server SIGKILLed): pg_auto_failover promotes the
  synchronous standby; the old primary rejoins as the standby;
- a worker host is cut from the network for 15 s mid-payment, then healed;
- an API host is cut for 10 s (nginx sends its requests to the other one);
- a worker restarts with its clock 60 s ahead, then behind, then 10 minutes ahead and
  behind (libfaketime);
- an API process is SIGKILLed and started again; a worker gets SIGTERM (drains) and again.

Runs when ``RELAYSTATE_TORTURE=1`` (``make torture``, in CI), as root; prints a table per
fault kind and asserts 0 acknowledged turns lost, 0 duplicate effects, 0 Tasks stuck.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.client import Client
from relaystate.server.api_keys import issue

from .. import services
from . import rig
from .agent import RECIPIENTS, Payments, templates
from .history import History, Op, check, stuck, wait_until

USERS = 20
APP = "tests.fleet.agent:templates"
PAY_SECONDS = "1.0"

pytestmark = pytest.mark.skipif(
    os.environ.get("RELAYSTATE_TORTURE") != "1", reason="make torture (RELAYSTATE_TORTURE=1)"
)


@dataclass
class Fault:
    kind: str
    at: float
    healed: float | None = None
    serving_again: float | None = None
    note: str = ""


@dataclass
class Fleet:
    net: rig.Network
    formation: rig.Formation
    base: Path
    url: str
    api: list[rig.Host] = field(default_factory=list)
    workers: list[rig.Host] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {
            "PAYMENTS": str(self.base / "payments.db"),
            "PAY_SECONDS": PAY_SECONDS,
            "PYTHONPATH": str(rig.REPO),
        }

    def start_api(self, host: rig.Host) -> None:
        args = ["serve", "--store", self.url, "--app", APP, "--execute", "queue"]
        args += ["--host", host.ip, "--port", "8700", "--no-demo-key", "--rate", "1000"]
        host.run(rig.relaystate(*args), self.base / f"{host.name}.log", self.env())

    def start_worker(self, host: rig.Host, skew: int = 0) -> None:
        args = ["worker", "--store", self.url, "--app", APP, "--lease", "5", "--grace", "10"]
        args += ["--concurrency", "8"]
        env = {**self.env(), **(rig.skewed(skew) if skew else {})}
        host.run(rig.relaystate(*args), self.base / f"{host.name}.log", env)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    why = rig.missing()
    if why is not None:
        pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)
    net = rig.Network()
    formation = rig.Formation()
    try:
        formation.start()
        formation.create_database("torture")
        tmp_path.chmod(0o777)
        found = Fleet(net, formation, tmp_path, formation.url("torture"))
        found.api = [net.host("api1"), net.host("api2")]
        found.workers = [net.host("wrk1"), net.host("wrk2")]
        yield found
    finally:
        net.remove()
        formation.remove()


def _nginx(api: list[rig.Host]) -> tuple[services.Nginx, int]:
    port = services.free_port()
    upstream = "\n".join(f"server {h.ip}:8700 max_fails=1 fail_timeout=2s;" for h in api)
    nginx = services.Nginx(
        f"upstream fleet {{ {upstream} }}\n"
        f"server {{ listen 127.0.0.1:{port};\n"
        "  location / { proxy_pass http://fleet; proxy_connect_timeout 1s;\n"
        "    proxy_read_timeout 20s; proxy_http_version 1.1;\n"
        # a turn carries its Idempotency-Key: sending it to the other host is safe; a 503
        # (the database away) is the client's to retry, every host would answer the same
        "    proxy_next_upstream error timeout non_idempotent; } }"
    )
    nginx.start(port)
    return nginx, port


def _said(client: Client, history: History, op: Op) -> Op:
    """One turn as a client sends it: again with the same key after any failure, for up to
    90 s (then it gives up, and the turn is not acknowledged)."""
    history.add(op)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            turn = client.say(op.session, op.text, key=op.key)
        except Exception as exc:  # refused, timed out, 503: the same key again
            history.failed(op, exc)
            time.sleep(0.5)
            continue
        op.error, op.ended = None, time.monotonic()
        op.task_id = turn.task.id if turn.task is not None else None
        return op
    op.ended = time.monotonic()
    return op


def _client_loop(
    base: str, user: str, secret: str, history: History, stop: threading.Event
) -> None:
    """One user paying, again and again: each payment in a Session of its own."""
    client = Client(base, secret, timeout=25, tries=1)
    rng = random.Random(user)
    n = 0
    while not stop.is_set():
        n += 1
        session = f"{user}-s{n}"
        text = f"pay {rng.randint(5, 500)} euros to {rng.choice(RECIPIENTS)}"
        asked = _said(client, history, Op(user, session, f"{session}-ask", text, time.monotonic()))
        if asked.acknowledged and asked.task_id is not None:
            _said(client, history, Op(user, session, f"{session}-yes", "yes", time.monotonic()))
        time.sleep(rng.uniform(1.5, 3.0))  # a person reads the answer
    client.close()


def _serving_again(history: History, at: float, timeout: float = 90) -> float | None:
    found: list[float] = []

    def answered() -> bool:
        first = history.first_answer_after(at)
        if first is not None:
            found.append(first)
        return first is not None

    wait_until(answered, timeout)
    return found[0] - at if found else None


@pytest.mark.timeout(1200)
def test_the_fleet_survives_failover_partitions_skew_and_kills(fleet: Fleet) -> None:
    # the schema and the users' keys, through the formation, before any host serves
    setup = Runtime(open_store(fleet.url), templates())
    secrets = {}
    for i in range(USERS):
        user = f"u{i:02d}"
        _, secrets[user] = issue(
            setup, Scope.admin("torture"), user, name="torture", admin=False, now=setup.clock()
        )
    warnings = setup.durability_warnings(Scope.admin("torture"))
    setup.close()
    assert warnings == [], warnings  # pg_auto_failover replicates synchronously
    for host in fleet.api:
        fleet.start_api(host)
    for host in fleet.workers:
        fleet.start_worker(host)
    nginx, port = _nginx(fleet.api)
    base = f"http://127.0.0.1:{port}"
    history = History()
    stop = threading.Event()
    clients = [
        threading.Thread(target=_client_loop, args=(base, u, s, history, stop), daemon=True)
        for u, s in secrets.items()
    ]
    faults: list[Fault] = []

    def fault(
        kind: str, act: Callable[[], str], hold: float = 0.0, heal: Callable[[], None] | None = None
    ) -> None:
        time.sleep(6)  # load between faults
        at = time.monotonic()
        f = Fault(kind, at, note=act())
        faults.append(f)
        if hold:
            time.sleep(hold)
        if heal is not None:
            heal()
        f.healed = time.monotonic()
        f.serving_again = _serving_again(history, at)
        print(
            f"torture: {kind}: {f.note}; serving again after {f.serving_again} s;"
            f" {len(history.acknowledged())} turns acknowledged so far",
            flush=True,
        )

    try:
        wait_until(lambda: _up(base), 60)
        for t in clients:
            t.start()
        wait_until(lambda: len(history.acknowledged()) >= USERS, 60)

        old: list[rig.Node] = []

        def kill_primary() -> str:
            primary = fleet.formation.primary()
            assert primary is not None
            old.append(primary)
            primary.kill()
            return f"{primary.name} killed"

        fault("failover", kill_primary)
        old[0].run()  # rejoins as the standby (pg_rewind)
        fleet.formation.wait_settled(180)
        wrk1, wrk2 = fleet.workers
        api1, api2 = fleet.api
        fault("partition worker", lambda: (wrk1.partition(), "wrk1 cut")[1], 15, wrk1.heal)
        fault("partition api", lambda: (api1.partition(), "api1 cut")[1], 10, api1.heal)

        def skew(seconds: int) -> Callable[[], str]:
            def act() -> str:
                wrk2.kill_all(signal.SIGKILL)
                fleet.start_worker(wrk2, skew=seconds)
                return f"wrk2 restarted {seconds:+d} s off"

            return act

        fault("skew +60 s", skew(60))
        fault("skew -60 s", skew(-60))
        fault("skew +10 min", skew(600))
        fault("skew -10 min", skew(-600))

        def kill_api() -> str:
            api2.kill_all(signal.SIGKILL)
            fleet.start_api(api2)
            return "api2 SIGKILLed and started"

        fault("sigkill api", kill_api)

        def term_worker() -> str:
            wrk1.kill_all(signal.SIGTERM)
            fleet.start_worker(wrk1)
            return "wrk1 SIGTERMed and started"

        fault("sigterm worker", term_worker)
        time.sleep(6)
    finally:
        stop.set()
        for t in clients:
            t.join(120)
        nginx.remove()

    checker = Runtime(open_store(fleet.url), templates())
    payments = Payments(fleet.base / "payments.db", 0)
    try:
        quiet = time.monotonic()
        wait_until(lambda: not stuck(checker, history, list(secrets)), 180, step=1)
        quiet = time.monotonic() - quiet
        print(f"torture: quiet {quiet:.1f} s after the load stopped; checking", flush=True)
        verdict = check(history, checker, payments, list(secrets))
    finally:
        checker.close()
    rows = []
    for f in faults:
        acked = [
            op for op in history.acknowledged() if f.at <= op.started < (f.healed or f.at) + 10
        ]
        rows.append(
            {
                "fault": f.kind,
                "note": f.note,
                "acknowledged": len(acked),
                "failed_requests": history.failures(f.at, (f.healed or f.at) + 10),
                "serving_again_s": None if f.serving_again is None else round(f.serving_again, 2),
            }
        )
    report = {
        "turns_acknowledged": verdict.acknowledged,
        "tasks": verdict.tasks,
        "done": verdict.done,
        "duplicate_effects": len(verdict.duplicate_effects),
        "lost_turns": len(verdict.lost_turns),
        "stuck": len(verdict.stuck),
        "seconds_to_quiet_after_load": round(quiet, 1),
        "failed_tries_by_kind": dict(history.kinds),
        "faults": rows,
    }
    print("\ntorture:", json.dumps(report, indent=1))
    if os.environ.get("RELAYSTATE_TORTURE_REPORT"):
        Path(os.environ["RELAYSTATE_TORTURE_REPORT"]).write_text(json.dumps(report, indent=1))
    assert verdict.acknowledged > 50
    assert verdict.problems == {}, verdict.problems
    assert history.kinds["internal"] == 0, history.kinds  # never a 500, a driver error


def _up(base: str) -> bool:
    import httpx

    try:
        return httpx.get(base + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.timeout(600)
def test_one_host_on_sqlite_survives_sigkills(tmp_path: Path) -> None:
    """The same clients and checker on the embedded store: one `serve` (it runs the Actions
    itself) SIGKILLed three times under load and started again each time."""
    url = f"sqlite:///{tmp_path}/store.db"
    setup = Runtime(open_store(url), templates())
    secrets = {}
    for i in range(USERS):
        user = f"u{i:02d}"
        _, secrets[user] = issue(
            setup, Scope.admin("torture"), user, name="torture", admin=False, now=setup.clock()
        )
    setup.close()
    port = services.free_port()
    env = {
        **os.environ,
        "PAYMENTS": str(tmp_path / "payments.db"),
        "PAY_SECONDS": PAY_SECONDS,
        "PYTHONPATH": str(rig.REPO),
    }
    args = rig.relaystate("serve", "--store", url, "--app", APP, "--port", str(port))
    args += ["--no-demo-key", "--rate", "1000"]

    def start() -> subprocess.Popen[bytes]:
        with open(tmp_path / "serve.log", "ab") as log:
            return subprocess.Popen(args, env=env, cwd=rig.REPO, stdout=log, stderr=log)

    server = start()
    base = f"http://127.0.0.1:{port}"
    history, stop = History(), threading.Event()
    clients = [
        threading.Thread(target=_client_loop, args=(base, u, s, history, stop), daemon=True)
        for u, s in secrets.items()
    ]
    kills: list[float | None] = []
    try:
        assert wait_until(lambda: _up(base), 60)
        for t in clients:
            t.start()
        for _ in range(3):
            time.sleep(8)
            at = time.monotonic()
            server.kill()  # SIGKILL: mid-turn, mid-payment
            server.wait(10)
            server = start()
            kills.append(_serving_again(history, at))
        time.sleep(6)
    finally:
        stop.set()
        for t in clients:
            t.join(120)
    checker = Runtime(open_store(url), templates())
    try:
        wait_until(lambda: not stuck(checker, history, list(secrets)), 120, step=1)
        verdict = check(history, checker, Payments(tmp_path / "payments.db", 0), list(secrets))
    finally:
        checker.close()
        server.terminate()
        server.wait(20)
    print(
        f"\ntorture sqlite: {verdict.acknowledged} turns acknowledged, {verdict.tasks} Tasks,"
        f" {verdict.done} done, {len(verdict.duplicate_effects)} duplicate effects;"
        f" serving again after each SIGKILL: {kills} s; failed tries: {dict(history.kinds)}",
        flush=True,
    )
    assert verdict.acknowledged > 50
    assert verdict.problems == {}, verdict.problems
    assert history.kinds["internal"] == 0, history.kinds
