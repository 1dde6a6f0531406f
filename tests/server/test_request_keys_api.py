"""``Idempotency-Key`` across a real server SIGKILLed after committing a turn but before
answering it (the lost response a client must retry): the retry is answered from the
committed turn, the words are stored once and the booking is made once. The header itself
(replay, refusals) is tested in process in test_api.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from .test_api import BOOK
from .test_server_outage import Server


def _effects(ledger: Path) -> list[str]:
    with sqlite3.connect(ledger) as db:
        return [r[0] for r in db.execute("SELECT kind FROM effects ORDER BY id")]


@pytest.mark.parametrize(
    ("failpoint", "before"),
    [
        ("after_turn:flight_booking=crash", []),  # the turn that starts the booking
        ("after_turn:flight_booking=crash", ["Dec 9, economy, for Alice Wang"]),
    ],
)
def test_a_turn_whose_answer_was_lost_is_answered_on_retry(
    tmp_path: Path, failpoint: str, before: list[str]
) -> None:
    srv = Server(f"sqlite:///{tmp_path}/api.db", tmp_path)
    key = json.loads(srv.cli("users", "create", "alice", "--json"))["api_key"]
    auth = {"Authorization": f"Bearer {key}"}
    path = "/v1/sessions/s1/messages"
    try:
        srv.start()
        with httpx.Client(base_url=srv.url, headers=auth, timeout=20) as api:
            for text in ["book a flight from Beijing to Shanghai", *before]:
                assert api.post(path, json={"text": text}).status_code == 200
            srv.stop()
            srv.env["RELAYSTATE_FAILPOINTS"] = failpoint
            srv.start()
            last = "yes" if before else BOOK
            sent = {"Idempotency-Key": "turn-7"}
            with pytest.raises(httpx.TransportError):  # the process died before answering
                api.post(path, json={"text": last}, headers=sent)
            assert srv.proc is not None and srv.proc.wait(timeout=10) == -9
            effects = _effects(srv.ledger) if srv.ledger.exists() else []

            del srv.env["RELAYSTATE_FAILPOINTS"]
            srv.start()
            retry = api.post(path, json={"text": last}, headers=sent)
            assert retry.status_code == 200, retry.text
            assert retry.headers["idempotent-replayed"] == "true"
            turn = retry.json()["turn"]
            assert turn["reply"] and turn["task"] is not None
            said = [m["text"] for m in api.get(path, params={"limit": 100}).json()["messages"]]
            assert said.count(last) == 1  # the words of the lost turn, once
            tasks = api.get("/v1/tasks", params={"status": "all"}).json()["tasks"]
            assert len(tasks) == 1
        if before:  # "yes" ran the booking inline before the crash: once, and not again
            assert effects == _effects(srv.ledger) and len(effects) == 1
            assert tasks[0]["status"] == "done"
    finally:
        srv.stop()
