"""The load of the rolling-upgrade test: users talking to relaystate through nginx.

Each user (one thread, one API key) loops until told to stop: opens a session, starts a
trip booking and a refund there by talking ("I want to book a trip", "I need a refund"),
answers whatever each Task asks, one turn at a time and alternating between the two (so
both are mid-conversation together), confirms the trip by saying "yes" and the refund with
``POST /v1/tasks/{id}/confirm`` (the version it was shown), then polls both Tasks until
they are done. Told to stop, a user finishes the Tasks it has open, then leaves.

Every request is recorded (status, latency, when, what), and every Task with its type,
template version and build as the user last saw them. Any answer that is not a 2xx, and
any connection error or timeout, is a failure; so is a conversation that does not move
on (the Task asks the same thing again and again) or a Task that never finishes.

Run on its own against a running deployment:
``python -m tests.upgrade.load --url http://127.0.0.1:8700 --store postgresql://... --users 20
--seconds 60`` (it creates the users' API keys in the store).
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao", "Lyon", "Nantes"]
PEOPLE = [
    "Ada Lovelace",
    "Alan Turing",
    "Grace Hopper",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Frances Allen",
    "Niklaus Wirth",
]
MEALS = ["standard", "vegetarian", "vegan"]
TIMEOUT = 60.0
MAX_TURNS = 12
"""Turns one Task may take to be filled and confirmed before the user gives up (a failure)."""
DONE_WAIT = 90.0
"""Seconds a confirmed Task may take to finish before the user gives up (a failure)."""
FINISHED = ("done", "failed", "cancelled", "needs_attention")


@dataclass
class Request:
    user: str
    method: str
    what: str
    status: int
    seconds: float
    at: float
    """time.time() when it was sent."""
    error: str = ""


@dataclass
class TaskSeen:
    task_id: str
    type: str
    user: str
    template_version: int
    created_by_build: str
    status: str = ""
    first_version: int = 0
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None


class Failure(Exception):
    pass


class User:
    def __init__(self, load: Load, name: str, key: str, seed: int) -> None:
        self.load, self.name = load, name
        self.rng = random.Random(seed)
        self.client = httpx.Client(
            base_url=load.url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=TIMEOUT,
            limits=httpx.Limits(max_keepalive_connections=1),
        )
        self.iterations = 0

    # -- requests -------------------------------------------------------------------------
    def call(self, method: str, path: str, what: str, body: Any = None) -> dict[str, Any]:
        started, at = time.perf_counter(), time.time()
        try:
            answer = self.client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            self._record(method, what, 0, started, at, f"{type(exc).__name__}: {exc}")
            raise Failure(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        error = "" if answer.is_success else answer.text[:500]
        self._record(method, what, answer.status_code, started, at, error)
        if not answer.is_success:
            raise Failure(f"{method} {path}: {answer.status_code} {error}")
        found: dict[str, Any] = answer.json()
        return found

    def _record(
        self, method: str, what: str, status: int, started: float, at: float, error: str
    ) -> None:
        took = time.perf_counter() - started
        self.load.record(Request(self.name, method, what, status, took, at, error))

    def say(self, session: str, text: str, task_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"text": text}
        if task_id is not None:
            body["task_id"] = task_id
        turn: dict[str, Any] = self.call("POST", f"/v1/sessions/{session}/messages", "turn", body)[
            "turn"
        ]
        if turn.get("task"):
            self.load.saw(self.name, turn["task"])
        return turn

    def task(self, task_id: str) -> dict[str, Any]:
        task: dict[str, Any] = self.call("GET", f"/v1/tasks/{task_id}", "task")["task"]
        self.load.saw(self.name, task)
        return task

    def think(self) -> None:
        time.sleep(self.rng.uniform(*self.load.think))

    # -- one round: a trip and a refund ---------------------------------------------------
    def answer(self, slot: str) -> str:
        person = PEOPLE[self.rng.randrange(len(PEOPLE))]
        return {
            "destination": CITIES[self.rng.randrange(len(CITIES))],
            "passenger_name": person,
            "first_name": person.split()[0],
            "last_name": person.split()[1],
            "bags": str(self.rng.randint(0, 3)),
            "meal": MEALS[self.rng.randrange(len(MEALS))],
            "order_number": f"ORD-{self.rng.randint(10000, 99999)}",
            "amount": str(self.rng.randint(5, 400)),
        }[slot]

    def start(self, session: str, text: str, type: str) -> dict[str, Any]:
        turn = self.say(session, text)
        task = turn.get("task")
        if not task or task["type"] != type:
            raise Failure(f"{text!r} started {task and task['type']!r}: {turn['reply']!r}")
        return dict(task)

    def step(self, session: str, task: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """One turn (or confirmation) for ``task``; the task after it, and whether the
        conversation part is over (confirmed)."""
        if task["status"] in FINISHED or task["confirmed"]:
            return task, True
        if task["missing_slots"]:
            turn = self.say(session, self.answer(task["missing_slots"][0]), task["id"])
            return dict(turn["task"]), False
        if task["type"] == "refund":  # the confirm endpoint, with the version shown
            body = {"yes": True, "version": task["version"]}
            done = self.call("POST", f"/v1/tasks/{task['id']}/confirm", "confirm", body)["task"]
            self.load.saw(self.name, done)
            return dict(done), True
        turn = self.say(session, "yes", task["id"])  # shown again if it changed meanwhile
        after = dict(turn["task"])
        return after, bool(after["confirmed"])

    def round(self) -> None:
        session = self.call("POST", "/v1/sessions", "session", {"language": "en"})["session"]["id"]
        self.think()
        tasks = [self.start(session, "I want to book a trip", "trip")]
        self.think()
        tasks.append(self.start(session, "I need a refund", "refund"))
        talking = {t["id"]: t for t in tasks}
        turns: Counter[str] = Counter()
        while talking:
            for task_id in list(talking):
                self.think()
                after, over = self.step(session, talking[task_id])
                turns[task_id] += 1
                if over:
                    del talking[task_id]
                elif turns[task_id] > MAX_TURNS:
                    raise Failure(f"task {task_id} still asks after {MAX_TURNS} turns: {after}")
                else:
                    talking[task_id] = after
        deadline = time.monotonic() + DONE_WAIT
        waiting = [t["id"] for t in tasks]
        while waiting:
            time.sleep(self.load.poll)
            for task_id in list(waiting):
                if self.task(task_id)["status"] in FINISHED:
                    waiting.remove(task_id)
            if waiting and time.monotonic() > deadline:
                raise Failure(f"tasks {waiting} not finished after {DONE_WAIT:.0f} s")
        self.iterations += 1

    def run(self) -> None:
        time.sleep(self.rng.uniform(0, 1.0))  # users do not arrive in lockstep
        try:
            while not self.load.stopping.is_set():
                try:
                    self.round()
                except Failure as exc:
                    self.load.fail(self.name, str(exc))
                    time.sleep(0.5)
        finally:
            self.client.close()


class Load:
    """``users`` (name -> API key) talking to ``url`` until ``stop``."""

    def __init__(
        self,
        url: str,
        users: dict[str, str],
        *,
        think: tuple[float, float] = (0.8, 2.0),
        poll: float = 0.25,
        seed: int = 12,
    ) -> None:
        self.url = url
        self.think = think
        self.poll = poll
        self.stopping = threading.Event()
        self.requests: list[Request] = []
        self.failures: list[tuple[str, str]] = []
        self.tasks: dict[str, TaskSeen] = {}
        self._lock = threading.Lock()
        self.users = [User(self, n, k, seed * 1000 + i) for i, (n, k) in enumerate(users.items())]
        self._threads: list[threading.Thread] = []
        self.started_at = 0.0

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def fail(self, user: str, why: str) -> None:
        with self._lock:
            self.failures.append((user, why))

    def saw(self, user: str, task: dict[str, Any]) -> None:
        with self._lock:
            seen = self.tasks.get(task["id"])
            if seen is None:
                seen = self.tasks[task["id"]] = TaskSeen(
                    task["id"],
                    task["type"],
                    user,
                    task["template_version"],
                    task["created_by_build"],
                    first_version=task["template_version"],
                )
            seen.template_version = task["template_version"]
            seen.status = task["status"]
            if task["status"] in FINISHED and seen.finished_at is None:
                seen.finished_at = time.time()

    def start(self) -> None:
        self.started_at = time.time()
        for user in self.users:
            thread = threading.Thread(target=user.run, name=f"load-{user.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 120.0) -> bool:
        """Users finish the Tasks they have open, then leave; whether all left in time."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.1))
        return not any(t.is_alive() for t in self._threads)

    # -- what was seen ----------------------------------------------------------------------
    def failed(self, since: float = 0.0, until: float = float("inf")) -> list[Request]:
        return [r for r in self.requests if not 200 <= r.status < 300 and since <= r.at < until]

    def during(self, since: float, until: float) -> list[Request]:
        return [r for r in self.requests if since <= r.at < until]

    def summary(self) -> dict[str, Any]:
        return {
            "requests": len(self.requests),
            "failed_requests": len(self.failed()),
            "failures": self.failures,
            "tasks": len(self.tasks),
            "rounds": sum(u.iterations for u in self.users),
            "by_status": dict(Counter(r.status for r in self.requests)),
        }


def main() -> None:
    from relaystate import Runtime, Scope, open_store
    from relaystate.server.api_keys import issue

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--store", required=True, help="Where to create the users' keys.")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", dest="json_path", help="Write every request and task here.")
    ns = parser.parse_args()
    keys = {}
    with Runtime(open_store(ns.store), []) as rt:
        for i in range(ns.users):
            name = f"load-{i:02d}"
            keys[name] = issue(
                rt, Scope.admin("load"), name, name=name, admin=False, now=rt.clock()
            )[1]
    load = Load(ns.url, keys)
    load.start()
    time.sleep(ns.seconds)
    load.stop()
    print(json.dumps(load.summary(), indent=2))
    if ns.json_path:
        with open(ns.json_path, "w") as out:
            json.dump(
                {
                    "requests": [asdict(r) for r in load.requests],
                    "tasks": [asdict(t) for t in load.tasks.values()],
                    "failures": load.failures,
                },
                out,
            )
    raise SystemExit(1 if load.failed() or load.failures else 0)


if __name__ == "__main__":
    main()
