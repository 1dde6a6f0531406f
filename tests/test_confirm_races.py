"""A "yes" racing a change from another device: the order always matches the summary the
user said yes to (issue 9). Two runtimes (a phone and a laptop) on one database, released
at the same instant by a barrier, race after race."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation, Turn
from relaystate.demo import Ledger, templates

BOOK = "book a flight from Beijing to Shanghai on Dec 9, economy, for Alice Wang"
RACES = {"sqlite": 100, "postgres": 50}


@pytest.fixture
def backend(sql_store_url: str) -> tuple[str, str]:
    """The backend's name (how many races it runs) and its store URL."""
    return sql_store_url.split(":", 1)[0].replace("postgresql", "postgres"), sql_store_url


def race(
    phone: Conversation, laptop: Conversation, user: Scope, task_id: str, n: int
) -> dict[str, Turn | Exception]:
    """The phone says yes while the laptop changes the cabin, released at one instant."""
    turns: dict[str, Turn | Exception] = {}
    gate = threading.Barrier(2)

    def say(who: str, conv: Conversation, text: str, session: str, task: str | None) -> None:
        gate.wait()
        try:
            turns[who] = conv.handle(user, text, session, task_id=task)
        except Exception as exc:  # reported by the caller's assertions
            turns[who] = exc

    racers = [
        threading.Thread(target=say, args=("yes", phone, "yes", f"phone-{n}", None)),
        threading.Thread(
            target=say, args=("change", laptop, "make it first class", f"laptop-{n}", task_id)
        ),
    ]
    for t in racers:
        t.start()
    for t in racers:
        t.join(timeout=60)
    return turns


def test_a_yes_never_confirms_a_change_it_did_not_see(
    backend: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    name, url = backend
    ledger = tmp_path / "ledger.db"
    outcomes: Counter[str] = Counter()
    with (
        Runtime(open_store(url), templates(ledger)) as phone_rt,
        Runtime(open_store(url), templates(ledger)) as laptop_rt,
    ):
        phone, laptop = Conversation(phone_rt), Conversation(laptop_rt)
        for n in range(RACES[name]):
            user = Scope.user(f"u{n}")
            shown = phone.handle(user, BOOK, f"phone-{n}")
            assert shown.state is not None and shown.state.task.stage == "confirming"
            task_id = shown.state.task.id
            turns = race(phone, laptop, user, task_id, n)
            assert all(isinstance(t, Turn) for t in turns.values()), turns
            final = phone_rt.task(user, task_id)
            orders = [a for a in final.actions if a.name == "create_order" and a.output]
            if orders:  # the yes won: what was ordered is what the phone showed
                outcomes["yes first"] += 1
                (order,) = orders
                assert order.input["cabin_class"] == "economy"
                assert final.task.slots["cabin_class"] == "economy"
                effect = Ledger(ledger).status(order.idempotency_key)
                assert effect is not None and "economy" in str(effect)
            else:  # the change won: nothing was ordered, and the phone was told
                outcomes["change first"] += 1
                assert final.task.slots["cabin_class"] == "first"
                yes = turns["yes"]
                assert isinstance(yes, Turn) and "changed" in yes.reply, yes
    assert sum(outcomes.values()) == RACES[name]
    print(f"{name}: {dict(outcomes)}")  # both orders of events should occur over the races
