"""``relaystate say`` (one turn per process, for scripts) and ``relaystate chat``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Options, app_parser

if TYPE_CHECKING:
    from ..conversation import Conversation


def register(commands: Any) -> None:
    p = commands.add_parser(
        "say", parents=[app_parser()], help="One conversational turn: prints the reply."
    )
    p.add_argument("text", metavar="TEXT", help="What the user says.")
    _talk_args(p)
    p.add_argument("--task", dest="task_id", help="Aim the turn at this Task explicitly.")
    p.add_argument(
        "--key",
        dest="request_key",
        help="A key for this request (a UUID): run again with the same key, the turn is"
        " answered from what it committed, not done twice.",
    )
    p.set_defaults(run=say)

    p = commands.add_parser(
        "chat", parents=[app_parser()], help="Talk with the agents; a new chat continues."
    )
    _talk_args(p)
    p.set_defaults(run=chat)


def _talk_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", required=True, help="Who is talking.")
    p.add_argument("--session", help="Session id.")
    p.add_argument(
        "--lang", choices=("zh", "en"), help="Reply in zh or en (default: as the user writes)."
    )


def _conversation(opts: Options) -> Conversation:
    from ..conversation import Conversation
    from ..errors import ConfigError
    from ..llm import default_model
    from ..memory.recorder import MemoryLayers, Recorder

    try:
        model = default_model()
    except ValueError as exc:  # its documented answer to a malformed RELAYSTATE_MODEL_* value
        raise ConfigError(str(exc)) from None
    runtime = opts.runtime()
    recorder = Recorder(MemoryLayers.of(runtime, model=model), clock=runtime.clock)
    return Conversation(runtime, model, memory=recorder)


def say(ns: argparse.Namespace) -> None:
    """One conversational turn in one process: prints the reply, or the Turn as JSON."""
    from ..scope import Scope

    opts = Options.parse(ns)
    scope = Scope.user(ns.user)
    conversation = _conversation(opts)
    with conversation.runtime:
        turn = conversation.handle(
            scope,
            ns.text,
            ns.session,
            language=ns.lang,
            task_id=ns.task_id,
            request_key=ns.request_key,
        )
    if opts.as_json:
        opts.emit(turn.to_dict())
    else:
        print(turn.reply)


def chat(ns: argparse.Namespace) -> None:
    """Talk with the agents; Ctrl-C any time, a new chat continues where you were."""
    from rich.console import Console

    from ..render import turn_panel
    from ..scope import Scope

    opts = Options.parse(ns)
    scope = Scope.user(ns.user)
    out = Console()
    conversation = _conversation(opts)
    session = ns.session
    out.print("[dim]relaystate chat: Ctrl-C or Ctrl-D to leave; your tasks stay.[/]")
    with conversation.runtime:
        try:
            while True:
                try:
                    text = out.input("[bold]you>[/] ")
                except EOFError:
                    break
                if not text.strip():
                    continue
                turn = conversation.handle(scope, text, session, language=ns.lang)
                session = turn.session_id
                out.print(turn_panel(turn, out.width))
        except KeyboardInterrupt:
            out.print("\n[dim]bye: say “continue” next time.[/]")
