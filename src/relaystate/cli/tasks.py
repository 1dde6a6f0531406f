"""``relaystate tasks list|show|history|resume|fill|resolve|rerun|unpin``: inspect, resume,
fill and settle Tasks, and release a pinned one whose build is gone.

Without ``--user`` the operator acts with admin scope. A ``TASK_ID`` may be the start of an
id (at least 4 characters, as the 8 shown everywhere) when one Task starts so.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from .options import Options, app_parser, scope_for, store_parser


def register(commands: Any) -> None:
    group = commands.add_parser("tasks", help="Inspect, resume and settle Tasks.")
    sub = group.add_subparsers(title="commands", metavar="COMMAND", parser_class=type(group))
    group.set_defaults(run=lambda ns: group.error("name a tasks command"))

    p = sub.add_parser("list", parents=[store_parser()], help="Tasks (the open ones).")
    p.add_argument("--user", help="Whose Tasks; default: every user's (the operator).")
    p.add_argument("--status", default="open", help="open, all, or statuses like done,failed.")
    p.add_argument("--limit", type=_limit, default=100)
    p.set_defaults(run=list_tasks)

    p = sub.add_parser("show", parents=[app_parser()], help="A Task: stage, slots, Actions.")
    _task_args(p)
    p.add_argument("--at", help="Show it as it was at a version or ISO time (journal replay).")
    p.set_defaults(run=show)

    p = sub.add_parser("history", parents=[app_parser()], help="The Task's journal.")
    _task_args(p)
    p.set_defaults(run=history)

    p = sub.add_parser("resume", parents=[app_parser()], help="Reconcile and run what is due.")
    _task_args(p)
    p.set_defaults(run=resume)

    p = sub.add_parser(
        "fill",
        parents=[app_parser()],
        help="Set slot values (an operator's approval, a correction) without a conversation.",
    )
    _task_args(p)
    p.add_argument(
        "values",
        nargs="+",
        metavar="SLOT=VALUE",
        help="A slot and its value (JSON where it parses: 30, true; else text).",
    )
    p.set_defaults(run=fill)

    p = sub.add_parser(
        "resolve", parents=[app_parser()], help="Settle an Action that needs attention."
    )
    p.add_argument("task_id", metavar="TASK_ID", help=_ID_HELP)
    p.add_argument("seq", type=int, metavar="SEQ", help="The Action's seq (see tasks show).")
    outcome = p.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--succeeded", dest="succeeded", action="store_true")
    outcome.add_argument("--failed", dest="succeeded", action="store_false")
    p.set_defaults(run=resolve)

    p = sub.add_parser(
        "rerun",
        parents=[app_parser()],
        help="Run an Action again once the error in its own code is fixed.",
    )
    p.add_argument("task_id", metavar="TASK_ID", help=_ID_HELP)
    p.add_argument("seq", type=int, metavar="SEQ", help="The Action's seq (see tasks show).")
    p.set_defaults(run=rerun)

    p = sub.add_parser(
        "unpin",
        parents=[app_parser()],
        help="Let any build continue a pinned Task whose build is gone for good.",
    )
    p.add_argument("task_id", metavar="TASK_ID", help=_ID_HELP)
    p.add_argument("--reason", required=True, help="Why (kept in the Task's journal).")
    p.set_defaults(run=unpin)


def _task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("task_id", metavar="TASK_ID", help=_ID_HELP)
    p.add_argument("--user", help="Act as this user (scopes every read); default: operator.")


_ID_HELP = "A Task id, or its first characters (at least 4) when one Task starts so."


def _limit(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 10_000):
        raise argparse.ArgumentTypeError(f"--limit takes 1 to 10000, not {text!r}")
    return int(text)


def _statuses(status: str) -> list[Any] | None:
    from ..model import OPEN_TASK_STATUSES, TaskStatus

    if status == "all":
        return None
    if status == "open":
        return list(OPEN_TASK_STATUSES)
    try:
        return [TaskStatus(s.strip()) for s in status.split(",")]
    except ValueError:
        from ..errors import ConfigError

        known = ", ".join(["open", "all", *(s.value for s in TaskStatus)])
        raise ConfigError(f"unknown status {status!r}; use one of: {known}") from None


def list_tasks(ns: argparse.Namespace) -> None:
    """Tasks (open ones by default) of one user from any session or device, or every
    user's for the operator; one line each, then where it stands, readable at 80 columns."""
    from ..runtime.runtime import Runtime
    from ..runtime.views import task_view

    opts = Options.parse(ns)
    statuses = _statuses(ns.status)
    scope = scope_for(ns.user)
    with Runtime(opts.stores(create=False), []) as rt:
        tasks = rt.tasks(scope, statuses=statuses, limit=ns.limit)
    if opts.as_json:
        opts.emit([task_view(t) for t in tasks])
        return
    from rich.console import Console

    from ..render import task_lines

    whose = f"for {ns.user}" if ns.user else "of any user"
    console = Console()
    if not tasks:
        console.print(f"No {ns.status} tasks {whose}.")
        return
    console.print(task_lines(tasks, owners=ns.user is None, width=console.width))


def show(ns: argparse.Namespace) -> None:
    """A Task: stage, status, slots, progress and its Actions (``--at``: as it was then)."""
    from ..runtime.views import state_view

    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        scope = scope_for(ns.user)
        task_id = rt.task_id(scope, ns.task_id)
        if ns.at is None:
            state = rt.task(scope, task_id)
        else:
            state = rt.replay(scope, task_id, _point(ns.at))
    if opts.as_json:
        opts.emit(state_view(state))
        return
    from rich.console import Console

    from ..render import print_state

    title = None if ns.at is None else f"Task {state.task.id} at {ns.at}"
    print_state(Console(), state, title)


def _point(at: str) -> int | datetime:
    """A version number (ASCII digits: ``int`` refuses the superscripts and other digits
    ``isdigit`` admits) or an ISO time, UTC unless it says otherwise."""
    if at.isascii() and at.isdigit():
        return int(at)
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        from ..errors import ConfigError

        raise ConfigError(f"--at takes a version number or an ISO time, not {at!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def history(ns: argparse.Namespace) -> None:
    """The Task's journal as a timeline: what changed, why, by whom, when."""
    from ..runtime.views import history_view

    opts = Options.parse(ns)
    from ..runtime.narrate import narrate, task_type

    with opts.runtime(create=False) as rt:
        scope = scope_for(ns.user)
        task_id = rt.task_id(scope, ns.task_id)
        baseline, entries = rt.history(scope, task_id)
        labels = rt.labels(task_type(baseline, entries))
    if opts.as_json:
        opts.emit(history_view(baseline, entries, labels))
        return
    from rich.console import Console

    from ..render import history_table

    told = narrate(baseline, entries, labels)
    Console().print(history_table(task_id, baseline, entries, [t.said for t in told]))


def resume(ns: argparse.Namespace) -> None:
    """Resume a Task from its stored state: reconcile, run what is due, say what's next."""
    from ..runtime.views import state_view

    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        scope = scope_for(ns.user)
        result = rt.resume(scope, rt.task_id(scope, ns.task_id))
    if opts.as_json:
        opts.emit({**state_view(result.state), "next_step": type(result.step).__name__})
        return
    from rich.console import Console

    from ..render import print_state

    print_state(Console(), result.state)


def fill(ns: argparse.Namespace) -> None:
    """Set slot values; as the operator unless ``--user`` (only the operator fills an
    operator's slot)."""
    opts = Options.parse(ns)
    values = dict(_slot_value(item) for item in ns.values)
    with opts.runtime(create=False) as rt:
        scope = scope_for(ns.user)
        state = rt.fill(scope, rt.task_id(scope, ns.task_id), values)
    _emit(opts, state)


def _slot_value(item: str) -> tuple[str, Any]:
    import json

    from ..errors import ConfigError

    name, sep, text = item.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"{item!r}: give slots as SLOT=VALUE, as in approval=approved")
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text
    return name.strip(), value


def resolve(ns: argparse.Namespace) -> None:
    """Settle an Action that needs attention, after checking the downstream by hand."""
    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        operator = scope_for(None)
        task_id = rt.task_id(operator, ns.task_id)
        state = rt.resolve(operator, task_id, ns.seq, succeeded=ns.succeeded)
    _emit(opts, state)


def rerun(ns: argparse.Namespace) -> None:
    """Run an Action stopped by a programming error again, after the fix is deployed."""
    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        operator = scope_for(None)
        state = rt.rerun(operator, rt.task_id(operator, ns.task_id), ns.seq)
    _emit(opts, state)


def unpin(ns: argparse.Namespace) -> None:
    """Release a pinned Task to every build; this build lifts it to its version."""
    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        operator = scope_for(None)
        state = rt.unpin(operator, rt.task_id(operator, ns.task_id), reason=ns.reason)
    _emit(opts, state)


def _emit(opts: Options, state: Any) -> None:
    """The Task an operator's command left: as JSON, or as the Task panel."""
    from ..runtime.views import state_view

    if opts.as_json:
        opts.emit(state_view(state))
        return
    from rich.console import Console

    from ..render import print_state

    print_state(Console(), state)
