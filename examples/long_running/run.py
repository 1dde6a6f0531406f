"""A slow Action on a worker that is killed half-way, taken over by the next worker:

    python examples/long_running/run.py

Carol asks for an export and says yes; the commit only queues the work. Worker A takes it
and starts the export in the job service, then is killed (SIGKILL) while it waits. Worker B
starts: the dead holder's lease counts as expired at once, and instead of exporting again it
asks the job service (the Action's check), waits while the job runs, and takes its result.
One export was made. Files go to ./demo-data (EXPORT_DIR to move them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from relaystate import ActionStatus, Runtime, Scope, TaskStatus, open_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from agent import Jobs, data_export  # noqa: E402  (the agent beside this script)


def main() -> None:
    folder = Path(os.environ.get("EXPORT_DIR", "demo-data")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("export-*.db*"):
        old.unlink()
    store, jobs_file = f"sqlite:///{folder}/export-store.db", folder / "export-jobs.db"
    jobs = Jobs(jobs_file)
    env = {**os.environ, "EXPORT_JOBS": str(jobs_file), "PYTHONPATH": str(HERE.parent.parent)}
    carol, ops = Scope.user("carol"), Scope.admin("ops")

    # the API's part: commit the yes, leave the slow Action to a worker
    with Runtime(open_store(store), [data_export(jobs)], execute="queue") as api:
        task = api.start(carol, "data_export", slots={"dataset": "sales", "format": "csv"})
        state = api.confirm(carol, task.task.id)
        task_id = state.task.id
        print(f"carol says yes: {state.task.status_text}")

        def worker(name: str) -> subprocess.Popen[bytes]:
            command = [sys.executable, "-m", "relaystate.cli", "worker", "--store", store]
            command += ["--app", "examples.long_running.agent:templates", "--build", "dev"]
            print(f"worker {name} starts")
            return subprocess.Popen(command, env=env, cwd=folder)

        first = worker("A")
        action = wait_for(api, ops, task_id, lambda a: a.status == ActionStatus.RUNNING)
        time.sleep(1.0)  # well into the export
        first.send_signal(signal.SIGKILL)
        first.wait()
        print(f"worker A killed mid-export; the Action is {action.status}, held by a dead process")
        print(f"job service: {jobs.started()} export started")

        second = worker("B")
        wait_for(api, ops, task_id, lambda a: a.status == ActionStatus.SUCCESS, limit=60)
        second.send_signal(signal.SIGTERM)  # drains: finishes its Task in hand, deregisters
        code = second.wait(30)
        final = api.task(ops, task_id)
        print(f"worker B finished it and stopped on SIGTERM (exit {code})")
        print(f"the Task: {final.task.status}: {final.task.status_text}")
        for entry in api.history(ops, task_id)[1]:
            print(f"  journal v{entry.version} {entry.actor}: {entry.reason.splitlines()[0]}")
        print(f"job service: {jobs.started()} export started; result {final.actions[0].output}")
        assert final.task.status == TaskStatus.DONE and jobs.started() == 1 and code == 0


def wait_for(api: Runtime, ops: Scope, task_id: str, until: object, limit: float = 20) -> object:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        actions = api.task(ops, task_id).actions
        if actions and until(actions[0]):  # type: ignore[operator]
            return actions[0]
        time.sleep(0.1)
    raise SystemExit(f"the export did not get there within {limit:g} s")


if __name__ == "__main__":
    main()
