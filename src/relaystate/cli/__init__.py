"""The command line: talk to the agents, inspect, resume and recover Tasks, run the demo.

Every command takes the shared options of :mod:`.options`. :func:`main` is the one error
boundary: a deliberate error (a :class:`~relaystate.errors.RelaystateError`) and a failure
of the environment (a full disk, a corrupt or read-only store, a database gone away, a closed
output) print one line ``error: ...`` on stderr and exit with code 2, never a traceback.
Anything else is a bug and keeps its traceback: it is not the user's to fix.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import demo, fleet, info, init, memory, ops, schema, serve, talk, tasks

__all__ = ["main", "parser"]

_ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EPIPE, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)
"""OSErrors that describe the machine, not the code: a full disk or quota, a closed pipe, a
read-only file system, permissions, a failing device."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 like every other error."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


def fail(message: str) -> NoReturn:
    """Print ``error: message`` as one line on stderr and exit with code 2."""
    _quiet_stdout()
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    root = _Parser(
        prog="relaystate",
        description="relaystate: durable Sessions, Tasks and Actions that resume where they "
        "stopped.",
    )
    root.add_argument("--version", action="version", version=f"relaystate {_version()}")
    commands = root.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    talk.register(commands)
    tasks.register(commands)
    ops.register(commands)
    demo.register(commands)
    schema.register(commands)
    serve.register(commands)
    memory.register(commands)
    fleet.register(commands)
    info.register(commands)
    init.register(commands)
    return root


def _version() -> str:
    from .options import default_build

    return default_build()


def main(argv: Sequence[str] | None = None) -> None:
    root = parser()
    ns = root.parse_args(argv)
    run = getattr(ns, "run", None)
    if run is None:
        root.print_help(sys.stderr)
        raise SystemExit(2)
    from ..errors import RelaystateError

    # A terminal or pipe that cannot show a character (PYTHONIOENCODING=ascii) gets an
    # escape for it, not a UnicodeEncodeError after the work is done.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        _check_environment(ns)
        run(ns)
        sys.stdout.flush()  # a full or closed output fails here, inside the boundary
    except RelaystateError as exc:
        fail(str(exc) or type(exc).__name__)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        message = _environment_failure(exc, ns)
        if message is None:
            raise  # a bug: its traceback is the report
        fail(message)


def _check_environment(ns: argparse.Namespace) -> None:
    """Settings every command depends on, read before anything opens: a bad value is one
    clear error now, not an exception in the middle of a turn (or at import)."""
    from .. import failpoints
    from ..errors import InvalidInput

    failpoints.active()
    if os.environ.get("RELAYSTATE_NOW", "").strip():
        from ..conversation.clock import pinned

        pinned()
    for name, value in vars(ns).items():
        if isinstance(value, str | os.PathLike) and not _is_text(os.fspath(value)):
            option = "TEXT" if name == "text" else f"--{name.replace('_', '-')}"
            raise InvalidInput(option, "is not valid UTF-8 text")


def _is_text(value: str | bytes) -> bool:
    """False for a string holding bytes that were not UTF-8 (Python keeps them in argv and
    the environment as lone surrogates, which nothing downstream can encode)."""
    if isinstance(value, bytes):
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _environment_failure(exc: Exception, ns: argparse.Namespace) -> str | None:
    """The one-line message for a failure of the machine rather than of the code (a driver
    error about the store, a full disk, a closed output); None for a bug."""
    from ..store import translate_error
    from .options import Options

    mapped = translate_error(exc, Options.parse(ns).store)
    if mapped is not None:
        return str(mapped)
    if isinstance(exc, OSError) and exc.errno in _ENVIRONMENT_ERRNOS:
        what = exc.strerror or type(exc).__name__
        if exc.errno == errno.EPIPE:
            return "the output was closed before everything was written (broken pipe)"
        if exc.filename is not None:
            return f"{what}: {exc.filename}"
        return f"cannot write the output: {what}"
    return None


def _quiet_stdout() -> None:
    """Flush stdout now, or point it at /dev/null when it cannot take the rest: otherwise
    the interpreter's last flush at exit prints a second error ("Exception ignored...")."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
