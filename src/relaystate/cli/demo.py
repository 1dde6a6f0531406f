"""``relaystate demo run|ledger``: the scripted walk-through and its downstream ledger."""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path
from typing import Any

from .options import Options, store_parser


def register(commands: Any) -> None:
    group = commands.add_parser("demo", help="The demo agents and their downstream ledger.")
    sub = group.add_subparsers(title="commands", metavar="COMMAND", parser_class=type(group))
    group.set_defaults(run=lambda ns: group.error("name a demo command"))
    p = sub.add_parser(
        "run",
        parents=[store_parser()],
        help="Leave mid-task, come back on a new device, survive a crash.",
    )
    p.add_argument(
        "--dir",
        dest="workdir",
        type=Path,
        default=Path("demo-data"),
        help="Where the demo's files go (demo-data); its store too, unless --store names one.",
    )
    p.set_defaults(run=run)
    p = sub.add_parser(
        "ledger", parents=[store_parser()], help="What the demo downstream received, by key."
    )
    p.add_argument("--ledger", help="The ledger file (default beside the store).")
    p.set_defaults(run=ledger)


def run(ns: argparse.Namespace) -> None:
    """A scripted walk-through: leave mid-task, come back on a new device, survive a crash."""
    from rich.console import Console

    from ..demo.script import run_demo
    from ..errors import ConfigError
    from ..store import split_url

    if ns.cache:
        raise ConfigError("demo run keeps its sessions in the store: it takes no --cache")
    opts = Options.parse(ns)
    store = opts.store if ns.store or os.environ.get("RELAYSTATE_STORE") else None
    if store is not None:
        split_url(store)  # a URL that cannot be parsed: refused before any file is made
    try:
        ns.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--dir {ns.workdir}: cannot be the demo's directory: {exc.strerror}"
        ) from None
    quiet = Console(file=io.StringIO()) if opts.as_json else Console()
    summary = run_demo(ns.workdir, quiet, store=store)
    if opts.as_json:
        opts.emit(summary)


def ledger(ns: argparse.Namespace) -> None:
    """What the demo downstream holds: each effect with its key and how many requests came."""
    from ..demo.ledger import Ledger

    opts = Options.parse(ns)
    entries = Ledger(opts.ledger_path(), create=False).entries()
    if opts.as_json:
        opts.emit(entries)
        return
    from rich.console import Console
    from rich.table import Table

    from ..render import short

    table = Table("idempotency key", "kind", "requests", "effects", "effect")
    for e in entries:
        table.add_row(
            e["idempotency_key"],
            e["kind"],
            str(e["requests"]),
            str(e["effects"]),
            short(e["effect"]),
        )
    Console().print(table)
