"""The options every command shares, parsed once into one object that builds what they need.

``--store URL`` (default ``RELAYSTATE_STORE``, else ``sqlite:///relaystate.db``), ``--cache
URL`` (``RELAYSTATE_CACHE``), ``--ledger PATH`` (``RELAYSTATE_LEDGER``, default beside the
store), ``--app module:function`` (``RELAYSTATE_APP``, default the demo agents) and
``--json``. Heavy modules (the runtime, rich) are imported by the command that uses them,
so ``relaystate say`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..scope import Scope
    from ..store.bundle import Stores
    from ..templates import TaskTemplate

DEFAULT_STORE = "sqlite:///relaystate.db"


def store_parser() -> argparse.ArgumentParser:
    """``--store``, ``--cache`` and ``--json``: for commands that need no templates."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("store")
    group.add_argument(
        "--store", help="Store URL (memory://, sqlite:///path.db, postgresql://...)."
    )
    group.add_argument("--cache", help="Session cache URL (redis://host:port/db).")
    group.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    return parser


def app_parser() -> argparse.ArgumentParser:
    """The store options plus ``--ledger`` and ``--app``: for commands that run templates."""
    parser = argparse.ArgumentParser(add_help=False, parents=[store_parser()])
    group = parser.add_argument_group("templates")
    group.add_argument("--ledger", help="The demo downstream ledger file.")
    group.add_argument(
        "--app", dest="app_ref", help="module:function returning your TaskTemplates."
    )
    return parser


@dataclass
class Options:
    """What the shared options say, with the environment's defaults applied."""

    store: str
    cache: str | None
    ledger: str | None
    app_ref: str | None
    as_json: bool

    @classmethod
    def parse(cls, ns: argparse.Namespace) -> Options:
        env = os.environ
        return cls(
            store=getattr(ns, "store", None) or env.get("RELAYSTATE_STORE") or DEFAULT_STORE,
            cache=getattr(ns, "cache", None) or env.get("RELAYSTATE_CACHE") or None,
            ledger=getattr(ns, "ledger", None) or env.get("RELAYSTATE_LEDGER") or None,
            app_ref=getattr(ns, "app_ref", None) or env.get("RELAYSTATE_APP") or None,
            as_json=bool(getattr(ns, "as_json", False)),
        )

    def ledger_path(self) -> Path:
        """The demo ledger: explicit, from the environment, or a file beside a SQLite store."""
        if self.ledger:
            return Path(self.ledger)
        if self.store.startswith("sqlite:///"):
            db = Path(self.store.removeprefix("sqlite:///").split("?")[0])
            return db.with_name(db.stem + "-ledger.db")
        return Path("relaystate-ledger.db")

    def templates(self) -> list[TaskTemplate]:
        if not self.app_ref:
            from ..demo import templates

            return templates(self.ledger_path())
        module_name, _, attr = self.app_ref.partition(":")
        try:
            module = importlib.import_module(module_name)
            factory = getattr(module, attr or "templates")
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"cannot load templates from {self.app_ref!r}: {exc}") from None
        found = factory() if callable(factory) else factory
        return list(found) if isinstance(found, Iterable) else [found]

    def stores(self, *, migrate: bool = True) -> Stores:
        from ..store import open_store

        return open_store(self.store, cache=self.cache, migrate=migrate)

    def runtime(self) -> Runtime:
        from ..runtime import Runtime

        templates = self.templates()
        return Runtime(self.stores(), templates, build="cli")

    def emit(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


def scope_for(user: str | None) -> Scope:
    """``--user U`` acts as that user; without it the operator acts, with admin scope."""
    from ..scope import Scope

    return Scope.user(user) if user else Scope.admin("cli")
