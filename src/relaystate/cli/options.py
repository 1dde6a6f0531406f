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
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime
    from ..scope import Scope
    from ..store.bundle import Stores
    from ..task.templates import TaskTemplate

DEFAULT_STORE = "sqlite:///relaystate.db"


def store_parser() -> argparse.ArgumentParser:
    """``--store``, ``--cache`` and ``--json``: for commands that need no templates."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("store")
    group.add_argument(
        "--store",
        help="Store URL: sqlite:///relative/path.db (three slashes: from here), "
        "sqlite:////absolute/path.db (four), postgresql://user@host/db or memory:// "
        f"(default $RELAYSTATE_STORE, else {DEFAULT_STORE}).",
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
        "--app",
        dest="app_ref",
        help="module:function returning your TaskTemplates (a module of the current "
        "directory or the import path; default $RELAYSTATE_APP, else the demo agents).",
    )
    group.add_argument(
        "--build",
        help="This process's build id (default $RELAYSTATE_BUILD, else the package version).",
    )
    group.add_argument(
        "--dual-write",
        action="store_true",
        help="While an older build still runs: lift no Task, start new ones on the oldest "
        "template version carried, so the older build can read everything written.",
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
    build: str = ""
    dual_write: bool = False

    @classmethod
    def parse(cls, ns: argparse.Namespace) -> Options:
        env = os.environ
        return cls(
            store=getattr(ns, "store", None) or env.get("RELAYSTATE_STORE") or DEFAULT_STORE,
            cache=getattr(ns, "cache", None) or env.get("RELAYSTATE_CACHE") or None,
            ledger=getattr(ns, "ledger", None) or env.get("RELAYSTATE_LEDGER") or None,
            app_ref=getattr(ns, "app_ref", None) or env.get("RELAYSTATE_APP") or None,
            as_json=bool(getattr(ns, "as_json", False)),
            build=build_id(_first_given(getattr(ns, "build", None), env.get("RELAYSTATE_BUILD"))),
            dual_write=bool(getattr(ns, "dual_write", False)),
        )

    def ledger_path(self) -> Path:
        """The demo ledger: explicit, from the environment, or a file beside a SQLite store."""
        if self.ledger:
            return Path(self.ledger)
        if self.store.startswith("sqlite:///"):
            db = Path(self.store.removeprefix("sqlite:///").split("?")[0])
            if not db.name:
                from ..errors import StoreURLError

                raise StoreURLError(f"bad SQLite store URL {self.store!r}: it names no file")
            return db.with_name(db.stem + "-ledger.db")
        return Path("relaystate-ledger.db")

    def templates(self) -> list[TaskTemplate]:
        """The demo agents, or the TaskTemplates ``--app module:function`` returns."""
        if not self.app_ref:
            from ..demo import templates

            return templates(self.ledger_path())
        return load_app(self.app_ref)

    def stores(self, *, migrate: bool = True, create: bool = True) -> Stores:
        """The store (``create=False`` for commands that must find an existing one)."""
        from ..store import open_store

        return open_store(self.store, cache=self.cache, migrate=migrate, create=create)

    def runtime(
        self,
        *,
        create: bool = True,
        templates: bool = True,
        execute: str = "inline",
        lease: timedelta | None = None,
    ) -> Runtime:
        """The store first, so that a bad store is the error reported before any template
        (or the demo ledger beside the store) is loaded; then the templates (none for
        commands that touch no task, such as ``users``)."""
        from ..runtime.runtime import Runtime

        stores = self.stores(create=create)
        try:
            return Runtime(
                stores,
                self.templates() if templates else [],
                build=self.build,
                execute=execute,
                dual_write=self.dual_write,
                lease=lease if lease is not None else timedelta(seconds=60),
            )
        except BaseException:
            stores.close()
            raise

    def emit(self, value: Any) -> None:
        """Print ``value`` as strict JSON (never NaN or Infinity: see views.to_json)."""
        from ..runtime.views import to_json

        sys.stdout.write(to_json(value, indent=2) + "\n")


BUILD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def build_id(text: str) -> str:
    """A build id as given, if it is one (letters, digits, ``._+-``, at most 64)."""
    if not BUILD_ID.fullmatch(text):
        from ..errors import ConfigError

        raise ConfigError(
            f"a build id is 1 to 64 letters, digits or ._+- (starting with a letter or "
            f"digit), not {text[:80]!r}"
        )
    return text


def seconds(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds from ``low`` to ``high`` (NaN refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes seconds, not {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"takes {low:g} to {high:g} seconds, not {text}")
        return value

    return parse


def _first_given(*values: str | None) -> str:
    """The first value given (an empty one too: it is refused, not silently replaced), else
    the package version."""
    found = next((v for v in values if v is not None), None)
    return default_build() if found is None else found


def default_build() -> str:
    """The package's version: the build id when none is given (``relaystate.version``,
    not the installed metadata: reading that costs every command ~9 ms of start-up)."""
    from ..version import VERSION

    return VERSION


def load_app(ref: str) -> list[TaskTemplate]:
    """The TaskTemplates of ``--app module:function`` (or ``module:NAME`` holding them;
    ``module`` alone means ``module:templates``). Anything else (no such module, a module
    that fails to import, a factory that raises or returns something that is not
    TaskTemplates) is a ConfigError naming ``ref`` and where it failed: it is the app's to
    fix, not relaystate's."""
    from ..errors import ConfigError
    from ..task.templates import TaskTemplate

    where = f"cannot load templates from --app {ref!r}"
    module_name, _, attr = ref.partition(":")
    attr = attr or "templates"
    if not module_name or module_name.startswith("."):
        raise ConfigError(f"{where}: name an importable module, as in mypackage.agents:templates")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # a module of one's own, as python -m does
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import {module_name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{where}: importing {module_name!r} failed: {_failure(exc)}") from exc
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{where}: module {module_name!r} has no {attr!r}") from None
    found: object = factory
    if callable(factory) and not isinstance(factory, TaskTemplate):
        try:
            found = factory()
        except (Exception, SystemExit) as exc:
            raise ConfigError(f"{where}: calling {attr}() failed: {_failure(exc)}") from exc
    if isinstance(found, TaskTemplate):
        return [found]
    if not isinstance(found, Iterable) or isinstance(found, str | bytes | Mapping):
        raise ConfigError(
            f"{where}: it gave {_kind(found)}, not TaskTemplates; name a function that "
            f"returns a list of TaskTemplate"
        )
    try:
        items = list(found)
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{where}: reading its templates failed: {_failure(exc)}") from exc
    wrong = [item for item in items if not isinstance(item, TaskTemplate)]
    if wrong:
        raise ConfigError(f"{where}: it gave {_kind(wrong[0])}, not a TaskTemplate")
    if not items:
        raise ConfigError(f"{where}: it gave no TaskTemplates")
    return items


def _kind(value: object) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{type(value).__name__} {shown}"


def _failure(exc: BaseException) -> str:
    """An exception in one line, with the file and line it was raised at."""
    said = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and not isinstance(exc, SyntaxError):
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text


def scope_for(user: str | None) -> Scope:
    """``--user U`` acts as that user; without it the operator acts, with admin scope."""
    from ..scope import Scope

    return Scope.user(user) if user else Scope.admin("cli")
