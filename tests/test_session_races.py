"""Many real processes talking in one session at the same moment: no task is lost from the
session, and the same request said at once converges on one Task (issue 9)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from relaystate import Runtime, Scope, open_store
from relaystate.demo import templates

ROOT = Path(__file__).resolve().parent.parent
ALICE = Scope.user("alice")


def race(url: str, ledger: Path, session_id: str, texts: list[str]) -> list[dict[str, Any]]:
    """Say every text in its own process, all released at one moment; their Turns."""
    start = time.time() + 3.0  # time for every interpreter to import and open the store
    procs = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.session_racer", url, str(ledger), "alice"),
                *(session_id, str(start), text),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for text in texts
    ]
    turns = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        turns.append(json.loads(out.strip().splitlines()[-1]))
    return turns


def test_12_turns_at_once_in_one_session_lose_no_task(sql_store_url: str, tmp_path: Path) -> None:
    texts = [f"I need another refund, order ORD-200{i:02d}" for i in range(12)]
    turns = race(sql_store_url, tmp_path / "ledger.db", "s-race", texts)
    with Runtime(open_store(sql_store_url), templates(tmp_path / "ledger.db")) as rt:
        session = rt.session(ALICE, "s-race")
        created = {t.id for t in rt.tasks(ALICE, limit=1000)}
        said = {t["task"]["id"] for t in turns if t.get("task")}
        assert len(said) == 12, "each 'another refund' is a Task of its own"
        assert said == created
        assert set(session.active_task_ids) == created  # none lost by a concurrent write
        user_words = [m for m in rt.messages(ALICE, "s-race", limit=1000) if m.role == "user"]
        assert len(user_words) == 12  # every turn's words landed once


def test_the_same_request_said_16_times_at_once_is_one_task(
    sql_store_url: str, tmp_path: Path
) -> None:
    texts = ["book a flight from Beijing to Shanghai"] * 16
    turns = race(sql_store_url, tmp_path / "ledger.db", "s-same", texts)
    with Runtime(open_store(sql_store_url), templates(tmp_path / "ledger.db")) as rt:
        flights = [t for t in rt.tasks(ALICE, limit=1000) if t.type == "flight_booking"]
        assert len(flights) == 1
        assert {t["task"]["id"] for t in turns} == {flights[0].id}
        assert rt.session(ALICE, "s-same").active_task_ids == [flights[0].id]
