"""LangGraph's side of ``make bench-compare``, run in the comparison's own environment
(``.venv-compare``: langgraph, its SQLite and PostgreSQL checkpointers, no relaystate).

The same workloads as ``relaystate_side.py``, the way LangGraph is meant to be used: one
graph, one thread per conversation, a checkpointer with the same durability as relaystate
(SQLite in WAL with ``synchronous=FULL``; PostgreSQL committing each checkpoint).

- ``grow``: a turn appends the user's line and the reply to ``messages`` (the
  ``add_messages``-style reducer) and sets a slot, one ``invoke`` per turn; figures at each
  history mark (JSON lines).
- ``resume``: a fresh process opens the checkpointer and reads the thread's state.
- ``crash``: a two-step graph whose ``pay`` node writes its payment to a ledger, then the
  process is SIGKILLed before the checkpoint of that step; ``recover`` resumes the thread
  in a new process (LangGraph runs the interrupted node again).
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from common import ledger_append, mark_line, payload, written
from langgraph.graph import END, START, StateGraph

THREAD = {"configurable": {"thread_id": "bench-thread"}}


class Chat(TypedDict):
    messages: Annotated[list[dict[str, str]], operator.add]
    slots: dict[str, str]


def turn_node(state: Chat) -> dict[str, Any]:
    """What a turn adds: the reply (the user's line came in with the input), one slot."""
    n = len(state["messages"])
    _, reply, note = payload(n)
    return {"messages": [{"role": "assistant", "text": reply}], "slots": {"note": note}}


def saver(store: str) -> Any:
    if store.startswith("postgres"):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        conn = Connection.connect(store, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        cp = PostgresSaver(conn)
        cp.setup()
        return cp
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = store.removeprefix("sqlite:///")
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    cp = SqliteSaver(conn)
    cp.setup()
    return cp


def chat_graph(store: str) -> Any:
    g = StateGraph(Chat)
    g.add_node("turn", turn_node)
    g.add_edge(START, "turn")
    g.add_edge("turn", END)
    return g.compile(checkpointer=saver(store))


def grow(args: argparse.Namespace) -> None:
    graph = chat_graph(args.store)
    done = 0
    for mark in args.marks:
        while done < mark - args.window:
            user, _, _ = payload(done)
            graph.invoke({"messages": [{"role": "user", "text": user}]}, THREAD)
            done += 1
        times, before = [], written(args.store)
        while done < mark:
            user, _, _ = payload(done)
            t0 = time.perf_counter()
            graph.invoke({"messages": [{"role": "user", "text": user}]}, THREAD)
            times.append(time.perf_counter() - t0)
            done += 1
        print(mark_line(mark, times, before, args.store), flush=True)


def resume(args: argparse.Namespace) -> None:
    if args.store.startswith("postgres"):  # the driver's import is not the resume
        import langgraph.checkpoint.postgres
        import psycopg  # noqa: F401
    else:
        import langgraph.checkpoint.sqlite  # noqa: F401
    t0 = time.perf_counter()
    graph = chat_graph(args.store)
    state = graph.get_state(THREAD)
    took = time.perf_counter() - t0
    assert state.values["messages"], "nothing to resume"
    print(json.dumps({"resume_ms": took * 1e3, "turns": len(state.values["messages"]) // 2}))


# -- a side effect interrupted by SIGKILL ---------------------------------------------------
class Order(TypedDict):
    order: str
    paid: bool
    shipped: bool


def order_graph(store: str, ledger: Path, crash: bool) -> Any:
    def pay(state: Order) -> dict[str, Any]:
        ledger_append(ledger, state["order"], "payment")  # the effect, not idempotent
        if crash:  # dies after the effect, before LangGraph checkpoints this step
            os.kill(os.getpid(), signal.SIGKILL)
        return {"paid": True}

    def ship(state: Order) -> dict[str, Any]:
        return {"shipped": True}

    g = StateGraph(Order)
    g.add_node("pay", pay)
    g.add_node("ship", ship)
    g.add_edge(START, "pay")
    g.add_edge("pay", "ship")
    g.add_edge("ship", END)
    return g.compile(checkpointer=saver(store))


def crash(args: argparse.Namespace) -> None:
    config = {"configurable": {"thread_id": args.order}}
    order_graph(args.store, Path(args.ledger), True).invoke(
        {"order": args.order, "paid": False, "shipped": False}, config
    )


def recover(args: argparse.Namespace) -> None:
    config = {"configurable": {"thread_id": args.order}}
    graph = order_graph(args.store, Path(args.ledger), False)
    graph.invoke(None, config)  # resume the interrupted thread from its last checkpoint
    print(json.dumps({"done": bool(graph.get_state(config).values.get("shipped"))}))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grow")
    g.add_argument("--store", required=True)
    g.add_argument("--marks", type=lambda s: [int(x) for x in s.split(",")], required=True)
    g.add_argument("--window", type=int, default=50)
    r = sub.add_parser("resume")
    r.add_argument("--store", required=True)
    for name in ("crash", "recover"):
        c = sub.add_parser(name)
        c.add_argument("--store", required=True)
        c.add_argument("--ledger", required=True)
        c.add_argument("--order", required=True)
    args = p.parse_args()
    {"grow": grow, "resume": resume, "crash": crash, "recover": recover}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
