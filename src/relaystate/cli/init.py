"""``relaystate init NAME``: a project of one's own that runs at once: a package ``NAME/``
with a task template (``agent.py``), its test and a README, beside which ``relaystate chat
--app NAME.agent:templates`` talks to it and ``python -m pytest NAME`` tests it."""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

FILES = {
    "__init__.py.tmpl": "__init__.py",
    "agent.py.tmpl": "agent.py",
    "test_agent.py.tmpl": "test_agent.py",
    "README.md.tmpl": "README.md",
}
"""The starter's files, and what each is called in the new package."""
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def register(commands: Any) -> None:
    p = commands.add_parser(
        "init",
        help="Start a project of your own: an agent package, its test and a README.",
    )
    p.add_argument("name", metavar="NAME", help="The package's name (lowercase, a-z, 0-9, _).")
    p.add_argument(
        "--dir",
        dest="parent",
        type=Path,
        default=Path("."),
        help="Where NAME/ goes (the current directory).",
    )
    p.set_defaults(run=init)


def init(ns: argparse.Namespace) -> None:
    """Write ``NAME/`` from the starter, refusing a name or a place that would clash."""
    from ..errors import ConfigError

    where = ns.parent / ns.name
    if not ns.parent.is_dir():
        raise ConfigError(f"--dir {ns.parent}: no such directory")
    if where.exists():
        raise ConfigError(f"{where} already exists: relaystate init writes a new folder only")
    name = check_name(ns.name)
    try:
        where.mkdir()
        for template, target in FILES.items():
            text = resources.files(__package__).joinpath("starter", template).read_text("utf-8")
            (where / target).write_text(fill(text, name), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {where}: {exc.strerror or exc}") from None
    shown = "" if ns.parent == Path(".") else f"cd {ns.parent} && "
    sys.stdout.write(
        f"Created {where}/ ({', '.join(FILES.values())}). Next, from {ns.parent.resolve()}:\n"
        f"  {shown}relaystate chat --app {name}.agent:templates\n"
        f"  {shown}python -m pytest {name}\n"
    )


def check_name(name: str) -> str:
    """``name`` if a new package may have it: lowercase, not a keyword, not a module that
    is already importable (it would be shadowed, or shadow it)."""
    from ..errors import ConfigError

    if not NAME.fullmatch(name):
        raise ConfigError(
            f"{name!r} is no package name: use 1 to 40 lowercase letters, digits or _, "
            "starting with a letter (as in helpdesk or my_agent)"
        )
    if keyword.iskeyword(name) or name in sys.builtin_module_names:
        raise ConfigError(f"{name!r} is a name Python keeps for itself: choose another")
    if name == "relaystate" or importlib.util.find_spec(name) is not None:
        raise ConfigError(f"{name!r} is already an installed module: choose another name")
    return name


def fill(text: str, name: str) -> str:
    """A starter file for the package ``name``."""
    return (
        text.replace("__NAME__", name)
        .replace("__TITLE__", name.replace("_", " "))
        .replace("__ENV__", name.upper())
    )
