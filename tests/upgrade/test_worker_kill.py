"""Issue 12: a worker SIGKILLed mid-action, and an old build refusing a Task a newer build
already lifted. Real ``relaystate worker`` and ``relaystate serve`` processes on PostgreSQL.

A worker killed while its action waits (after the effect reached the downstream, or before)
leaves a running action under its lease and its claim on the work item. Another worker on
the same host sees at once that the holder's process is gone (no need to wait out the 30 s
lease), claims the item, asks the downstream what happened (the action's ``check``) and
finishes the Task: exactly one effect either way, and the effect made before the kill is
the one the Task records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from relaystate import Runtime, Scope, TaskStatus, open_store
from relaystate.errors import TaskTooNew
from relaystate.model import ActionStatus
from relaystate.server.api_keys import issue

from ..services import free_port
from . import app_v1, app_v2, evidence
from .fleet import APPS, ROOT

USER = Scope.user("kim")
SLOTS = {"destination": "Lisbon", "passenger_name": "Ada Lovelace", "bags": 1}
LEASE = 30.0
"""The workers' lease: the takeover must come long before it runs out."""


def worker(
    url: str,
    ledger: Path,
    build: str = "v1",
    *,
    lease: float = LEASE,
    host: str | None = None,
    **env: str,
) -> subprocess.Popen[bytes]:
    """A ``relaystate worker``; with ``host``, in a UTS namespace of its own where the
    machine is called that (a worker on another machine, as far as leases can tell)."""
    cmd = [sys.executable, "-m", "relaystate.cli", "worker", "--store", url]
    cmd += ["--app", APPS[build], "--build", build, "--lease", str(lease), "--grace", "5"]
    if host is not None:
        cmd = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *cmd]
    base = {"PYTHONPATH": str(ROOT), "RELAYSTATE_LEDGER": str(ledger), "RELAYSTATE_BUILD": build}
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, **base, "UPGRADE_ACTION_SECONDS": "0:0", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def confirmed_trip(url: str, ledger: Path) -> str:
    """A v1 trip, filled and confirmed through an API-like runtime that leaves its action
    to the workers: its work item is due."""
    with Runtime(open_store(url), app_v1.templates(), build="v1", execute="queue") as rt:
        task = rt.start(USER, "trip", slots=SLOTS).task
        done = rt.confirm(USER, task.id, True)
        assert done.task.due_at is not None
        return task.id


def wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"the worker exited {proc.returncode}: {out}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def killed_once_started(proc: subprocess.Popen[bytes], marker: Path) -> None:
    """SIGKILL ``proc`` once it has written ``marker`` (its action is where the test wants
    it); never leave it running."""
    try:
        wait_for(marker, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("at", ["after", "before"])
def test_a_worker_killed_mid_action_is_taken_over_with_one_effect(
    at: str, postgres_url: str, tmp_path: Path
) -> None:
    """``after``: the effect landed, then the worker died: the next worker finds it with
    ``check`` and records it (nothing runs again). ``before``: nothing landed: the next
    worker's ``check`` says so, and it runs the action once."""
    ledger = tmp_path / "ledger.db"
    task_id = confirmed_trip(postgres_url, ledger)
    blocks = tmp_path / "blocks"
    blocks.mkdir()
    first = worker(postgres_url, ledger, UPGRADE_BLOCK_DIR=str(blocks), UPGRADE_BLOCK_AT=at)
    killed_once_started(first, blocks / f"started-{task_id}")
    killed_pid = first.pid
    made = evidence.effects(ledger)
    assert len(made) == (1 if at == "after" else 0)
    with Runtime(open_store(postgres_url), app_v1.templates(), build="v1") as rt:
        stuck = rt.stores.tasks.load(task_id, evidence.ADMIN)
        assert stuck is not None
        assert stuck.actions[0].status == ActionStatus.RUNNING
        assert str(killed_pid) in str(stuck.actions[0].lease_owner)

    started = time.monotonic()
    second = worker(postgres_url, ledger)
    try:
        with Runtime(open_store(postgres_url), app_v1.templates(), build="v1") as rt:
            while True:
                state = rt.stores.tasks.load(task_id, evidence.ADMIN)
                assert state is not None
                if state.task.status == TaskStatus.DONE:
                    break
                assert time.monotonic() - started < LEASE - 5, "no takeover before the lease ended"
                assert second.poll() is None, second.communicate()
                time.sleep(0.1)
            took = time.monotonic() - started
            assert rt.stores.coordination.queued_work() == []
    finally:
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=30)
    assert second.returncode == 0, out.decode()
    made = evidence.effects(ledger)
    assert len(made) == 1, made
    assert evidence.duplicates(made) == {"keys": [], "actions": []}
    action = state.actions[0]
    assert action.status == ActionStatus.SUCCESS
    assert action.output["effect_id"] == made[0]["id"]
    ran_in = killed_pid if at == "after" else second.pid
    assert made[0]["pid"] == ran_in, (made[0], killed_pid, second.pid)
    print(f"taken over and done {took:.2f} s after the second worker started")


def _can_unshare() -> bool:
    try:
        done = subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.timeout(240)
@pytest.mark.skipif(not _can_unshare(), reason="needs unshare --uts (root) to fake another host")
def test_a_worker_killed_on_another_host_is_taken_over_once_its_leases_end(
    postgres_url: str, tmp_path: Path
) -> None:
    """Killed on another machine, a worker cannot be seen dead: its claim (``--lease``) and
    its action's lease must run out first; then the next worker reconciles, one effect."""
    ledger = tmp_path / "ledger.db"
    task_id = confirmed_trip(postgres_url, ledger)
    blocks = tmp_path / "blocks"
    blocks.mkdir()
    first = worker(
        postgres_url,
        ledger,
        lease=3,
        host="elsewhere",
        UPGRADE_BLOCK_DIR=str(blocks),
        UPGRADE_BLOCK_AT="after",
    )
    killed_once_started(first, blocks / f"started-{task_id}")
    with Runtime(open_store(postgres_url), app_v1.templates(), build="v1") as rt:
        stuck = rt.stores.tasks.load(task_id, evidence.ADMIN)
        assert stuck is not None and str(stuck.actions[0].lease_owner).startswith("elsewhere/")
        expires = stuck.actions[0].lease_expires_at
        assert expires is not None
        action_lease = (expires - rt.clock()).total_seconds()
    started = time.monotonic()
    second = worker(postgres_url, ledger, lease=3)
    try:
        with Runtime(open_store(postgres_url), app_v1.templates(), build="v1") as rt:
            while True:
                state = rt.stores.tasks.load(task_id, evidence.ADMIN)
                assert state is not None
                if state.task.status == TaskStatus.DONE:
                    break
                assert time.monotonic() - started < action_lease + 20, "never taken over"
                time.sleep(0.2)
        took = time.monotonic() - started
    finally:
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=30)
    assert second.returncode == 0, out.decode()
    print(f"taken over after {took:.1f} s (the action's lease had {action_lease:.1f} s left)")
    assert took >= min(action_lease, 3) - 0.5, "taken over while its lease still held"
    made = evidence.effects(ledger)
    assert len(made) == 1 and made[0]["pid"] == first.pid, made
    assert state.actions[0].output["effect_id"] == made[0]["id"]


@pytest.mark.timeout(180)
def test_an_old_build_refuses_a_task_a_newer_build_lifted(
    postgres_url: str, tmp_path: Path
) -> None:
    """A trip started on v1 and lifted by v2: a v1 API process answers 503 task_too_new to
    talking to it (named or not), confirming, resuming and cancelling it, and writes
    nothing (the Task, its journal and the session's messages are as they were); a v1
    runtime refuses to change it too. A plain read may be served, as stored."""
    ledger = tmp_path / "ledger.db"
    with Runtime(open_store(postgres_url), app_v1.templates(), build="v1") as rt:
        session = rt.open_session(USER).id
        partial = {k: v for k, v in SLOTS.items() if k != "bags"}
        task_id = rt.start(USER, "trip", session_id=session, slots=partial).task.id
        key = issue(rt, Scope.admin("t"), "kim", name="kim", admin=False, now=rt.clock())[1]
    with Runtime(open_store(postgres_url), app_v2.templates(), build="v2") as rt:
        lifted = rt.task(USER, task_id)  # read by v2: lifted, journaled by migration
        assert lifted.task.template_version == 2
        assert lifted.task.slots["first_name"] == "Ada"

    def stored() -> tuple[str, list[str], int]:
        with Runtime(open_store(postgres_url), [], build="probe") as probe:
            state = probe.stores.tasks.load(task_id, evidence.ADMIN)
            assert state is not None
            entries = evidence.journal(probe.stores, task_id)
            said = probe.stores.sessions.messages(session, USER, limit=1000)
            row = json.dumps(state.to_dict(), sort_keys=True, default=str)
            return row, [f"{e.version} {e.actor} {e.reason}" for e in entries], len(said)

    before = stored()
    assert before[1][-1].split(" ", 1)[1] == "migration migrated trip from version 1 to 2"

    port = free_port()
    cmd = [sys.executable, "-m", "relaystate.cli", "serve", "--store", postgres_url]
    cmd += ["--app", APPS["v1"], "--build", "v1", "--port", str(port), "--execute", "queue"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RELAYSTATE_BUILD": "v1"}
    env["RELAYSTATE_LEDGER"] = str(ledger)
    api = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert api.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        read = client.get(f"/v1/tasks/{task_id}")  # a read writes nothing: served as stored
        if read.status_code == 200:
            assert read.json()["task"]["template_version"] == 2, read.text
        else:
            assert read.status_code == 503, read.text
        writes = [
            client.post(f"/v1/sessions/{session}/messages", json={"text": "2", "task_id": task_id}),
            client.post(f"/v1/sessions/{session}/messages", json={"text": "2 bags"}),
            client.post(f"/v1/tasks/{task_id}/confirm", json={"yes": True}),
            client.post(f"/v1/tasks/{task_id}/resume"),
            client.post(f"/v1/tasks/{task_id}/cancel"),
        ]
        for answer in writes:
            assert answer.status_code == 503, (answer.request.url, answer.text)
            assert answer.json()["error"]["code"] == "task_too_new", answer.text
            assert answer.headers.get("retry-after"), answer.headers
        client.close()
    finally:
        api.terminate()
        api.wait(30)
    assert stored() == before, "a v1 process wrote to a Task v2 lifted"

    with Runtime(open_store(postgres_url), app_v1.templates(), build="v1") as old:
        for attempt in (
            lambda: old.fill(USER, task_id, {"bags": 2}),
            lambda: old.advance(Scope.admin("t"), task_id),
            lambda: old.confirm(USER, task_id, True),
        ):
            with pytest.raises(TaskTooNew):
                attempt()
    assert stored() == before
