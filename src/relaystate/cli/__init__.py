"""The command line: talk to the agents, inspect, resume and recover Tasks, run the demo.

Every command takes the shared options of :mod:`.options`. Bad input prints one line
``error: ...`` on stderr and exits with code 2; it never shows a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import demo, ops, schema, talk, tasks

__all__ = ["main", "parser"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 like every other error."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    root = _Parser(
        prog="relaystate",
        description="relaystate: durable Sessions, Tasks and Actions that resume where they "
        "stopped.",
    )
    commands = root.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    talk.register(commands)
    tasks.register(commands)
    ops.register(commands)
    demo.register(commands)
    schema.register(commands)
    return root


def main(argv: Sequence[str] | None = None) -> None:
    root = parser()
    ns = root.parse_args(argv)
    run = getattr(ns, "run", None)
    if run is None:
        root.print_help(sys.stderr)
        raise SystemExit(2)
    from ..errors import RelaystateError

    try:
        run(ns)
    except (RelaystateError, ValueError, OSError) as exc:
        fail(str(exc) or type(exc).__name__)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
