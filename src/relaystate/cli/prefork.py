"""Several server processes on one listening socket (``relaystate serve --workers N``).

A Python process answers turns on one core (the GIL), so a machine's other cores serve
only through more processes. The parent binds the socket, then forks the children, which
each open their own store connections and accept on the inherited socket (the kernel
spreads the connections). The parent only supervises: SIGTERM or SIGINT is passed to every
child (each drains its requests and exits); a child that dies unexpectedly is started
again, unless children keep dying within seconds of their start (a broken configuration:
then everything stops and the parent exits 1, rather than forking forever).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

QUICK_DEATH = 5.0
"""Seconds: a child that dies sooner after its start counts towards giving up."""
GIVE_UP = 5
"""Quick deaths in a row after which the parent stops every child and exits 1."""


def run(workers: int, serve: Callable[[], None]) -> int:
    """Fork ``workers`` children that each run ``serve`` until it returns; supervise them
    until all have stopped. The exit code for the parent: 0, or 1 after giving up."""
    children: dict[int, float] = {}  # pid -> when it started
    stopping = False

    def spawn() -> None:
        pid = os.fork()
        if pid == 0:  # the child: it serves, and never returns into the parent's code
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            code = 0
            try:
                serve()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        children[pid] = time.monotonic()

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            _signal(pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    quick_deaths = 0
    try:
        for _ in range(workers):
            spawn()
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            started = children.pop(pid, None)
            if started is None or stopping:
                continue
            code = os.waitstatus_to_exitcode(status)
            print(f"relaystate serve: worker {pid} exited ({code}); starting another", flush=True)
            quick_deaths = quick_deaths + 1 if time.monotonic() - started < QUICK_DEATH else 0
            if quick_deaths >= GIVE_UP:
                print("relaystate serve: workers keep dying at start; stopping", file=sys.stderr)
                stop(signal.SIGTERM, None)
                _reap(children)
                return 1
            spawn()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, sig)


def _reap(children: dict[int, float]) -> None:
    while children:
        try:
            pid, _ = os.wait()
        except ChildProcessError:
            return
        children.pop(pid, None)
