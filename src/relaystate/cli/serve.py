"""``relaystate serve`` (the HTTP API and the dashboard) and ``relaystate users`` (their
keys): what the people who deploy relaystate run."""

from __future__ import annotations

import argparse
import contextlib
import errno
import signal
import socket
import sys
from typing import Any

from ..errors import InvalidInput, NotFound
from . import durability
from .options import Options, app_parser, scope_for, seconds, store_parser

DEFAULT_PORT = 8700
DEMO_USER = "demo"
SERVE_KEY = "serve"
"""The name of the demo key ``serve`` mints (and revokes again at its next start)."""
GRACE = 3.0
"""Seconds a stopping server gives open requests by default (event streams never end by
themselves, so a drain is bounded; a request running a slow Action inline may need more)."""


def register(commands: Any) -> None:
    p = commands.add_parser(
        "serve",
        parents=[app_parser()],
        help="Run the HTTP API and the dashboard (uvicorn) over the store.",
    )
    p.add_argument("--host", default="127.0.0.1", help="Address to listen on (127.0.0.1).")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"Port ({DEFAULT_PORT}).")
    p.add_argument("--rate", type=float, default=20.0, help="Requests a second per API key (20).")
    p.add_argument(
        "--grace",
        type=seconds(0, 3600),
        default=GRACE,
        help=f"Seconds open requests get to finish on SIGTERM ({GRACE:g}).",
    )
    p.add_argument(
        "--execute",
        choices=("inline", "queue"),
        default="inline",
        help="inline: run Actions in the request (the embedded default); queue: leave them "
        "to `relaystate worker` processes.",
    )
    p.add_argument(
        "--embedder",
        help="Vectors of long-term memory: none, hash, e5 or openai:MODEL@BASE_URL "
        "(default $RELAYSTATE_EMBEDDER, else the best installed: e5 with relaystate[embed], "
        "embedding in the background, else hash, inline with the turn).",
    )
    p.add_argument(
        "--reranker",
        help="Orders memory search's top hits again: none, tei:BASE_URL, "
        "cohere:MODEL@BASE_URL, jina:MODEL@BASE_URL or e5-windows (key: "
        "$RELAYSTATE_RERANKER_API_KEY); default $RELAYSTATE_RERANKER, else none.",
    )
    p.add_argument(
        "--rewriter",
        help="Splits a memory search's question into searches: none or "
        "openai:MODEL@BASE_URL (key: $RELAYSTATE_REWRITER_API_KEY); default "
        "$RELAYSTATE_REWRITER, else none.",
    )
    p.add_argument(
        "--extractor",
        help="Facts of the memory items the API adds, extracted into the memory graph in "
        "the background: none or openai:MODEL@BASE_URL (key: "
        "$RELAYSTATE_EXTRACTOR_API_KEY); default $RELAYSTATE_EXTRACTOR, else none.",
    )
    p.add_argument(
        "--workers",
        type=_workers,
        default=1,
        help="Server processes on the one port (1). Each takes a core; on SQLite they share "
        "the file's one writer, so more than one pays on PostgreSQL. The rate limit is per "
        "process.",
    )
    p.add_argument(
        "--no-demo-key",
        dest="demo_key",
        action="store_false",
        help=f"Mint no key for the demo user '{DEMO_USER}' (a deployment's users have their "
        "own: relaystate users create).",
    )
    p.set_defaults(run=serve)

    users = commands.add_parser("users", help="API keys of the HTTP server: create, revoke, list.")
    sub = users.add_subparsers(title="commands", metavar="COMMAND", parser_class=type(users))
    users.set_defaults(run=lambda ns: users.error("name a users command"))
    p = sub.add_parser("create", parents=[store_parser()], help="A new API key for a user.")
    p.add_argument("name", help="The user (their tasks are this user's tasks).")
    p.add_argument("--admin", action="store_true", help="The key may read every user's data.")
    p.set_defaults(run=create)
    p = sub.add_parser("revoke", parents=[store_parser()], help="Revoke a user's keys, or one.")
    p.add_argument("name", nargs="?", help="The user whose keys to revoke.")
    p.add_argument("--key", help="Revoke only this key id.")
    p.set_defaults(run=revoke)
    p = sub.add_parser("list", parents=[store_parser()], help="Every API key (no secrets).")
    p.set_defaults(run=list_keys)


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"workers is 1 to 64, not {text!r}")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, not {text!r}")
    return int(text)


def serve(ns: argparse.Namespace) -> None:
    """Run the server until Ctrl-C; print its address and a key for the demo user.

    The port is taken first: a busy one is one ``error:`` line, before anything is written.
    The demo key replaces the one an earlier ``serve`` printed (that one is revoked). With
    ``--workers N``, N processes serve on the one socket (:mod:`.prefork`)."""
    opts = Options.parse(ns)
    models = _models(ns)  # a bad spec is one error line, before the port or the store
    listening = _listen(ns.host, ns.port)
    try:
        if ns.workers == 1:
            with opts.runtime(execute=ns.execute) as rt:
                _announce(ns, rt)
                _run(ns, rt, listening, models)
            return
        with opts.runtime(execute=ns.execute) as rt:  # the schema, the key: once, up front
            _announce(ns, rt)
        from . import prefork

        del models  # checked; each child makes its own (a local model is not forked)

        def child() -> None:
            with opts.runtime(execute=ns.execute) as own:
                _run(ns, own, listening, _models(ns))

        code = prefork.run(ns.workers, child)
        if code:
            raise SystemExit(code)
    finally:
        listening.close()


def _announce(ns: argparse.Namespace, rt: Any) -> None:
    durability.warn(rt)
    secret = _demo_key(rt) if ns.demo_key else None
    where = f"http://{_shown(ns.host)}:{ns.port}/"
    workers = f" ({ns.workers} worker processes)" if ns.workers > 1 else ""
    print(f"relaystate: dashboard at {where}, API at {where}docs{workers}", flush=True)
    if secret is not None:
        print(f"API key for the demo user '{DEMO_USER}': {secret}", flush=True)


def _models(ns: argparse.Namespace) -> dict[str, Any]:
    """The reranker, rewriter and extractor of long-term memory ``create_app`` gets, from
    the options or the environment (ConfigError for a spec that cannot be read)."""
    from ..memory.extract import extractor_from_config
    from ..memory.rerank import reranker_from_config
    from ..memory.rewrite import rewriter_from_config

    return {
        "reranker": reranker_from_config(ns.reranker),
        "rewriter": rewriter_from_config(ns.rewriter),
        "extractor": extractor_from_config(ns.extractor),
    }


def _run(ns: argparse.Namespace, rt: Any, listening: socket.socket, models: dict[str, Any]) -> None:
    """Serve on ``listening`` over ``rt`` until SIGTERM or SIGINT (then drain and return)."""
    import uvicorn

    from ..server import create_app
    from ..server.protocol import uvicorn_options
    from ..workers.presence import Presence
    from .memory import embedder

    app = create_app(
        rt,
        rate=ns.rate,
        burst=max(2 * ns.rate, 1.0),
        embedder=embedder(ns.embedder),
        **models,
    )
    presence = Presence(rt, role="api")
    presence.start()  # `relaystate builds` counts this process under its build
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again
    # through the handler it found: that one exits cleanly (0, deregistered) instead
    # of the process dying by the signal; so does a signal before uvicorn started.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_cleanly)
    config = uvicorn.Config(
        app,
        host=ns.host,
        port=ns.port,
        log_level="warning",
        timeout_graceful_shutdown=max(1, round(ns.grace)),
        **uvicorn_options(),  # what uvicorn refuses itself is answered in JSON too
    )
    try:
        # SIGTERM: stop accepting, finish requests in flight, exit. Open event
        # streams end with the process instead of holding a restart forever.
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        presence.stop()


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, or one clear error (the port is
    taken, the address is not this machine's) before anything is written."""
    from ..errors import ConfigError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: no such address here ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is in use (another relaystate serve?): stop it, or "
                "choose another with --port"
            ) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _demo_key(rt: Any) -> str:
    """A fresh key for the demo user; those earlier ``serve`` runs printed are revoked."""
    from ..scope import Scope
    from ..server.api_keys import issue

    operator = Scope.admin("serve")
    for old in rt.api_keys(operator, DEMO_USER):
        if old.name == SERVE_KEY and old.active:
            # another serve starting at the same moment may have revoked it first
            with contextlib.suppress(NotFound):
                rt.revoke_api_keys(operator, key_id=old.id)
    _, secret = issue(rt, operator, DEMO_USER, name=SERVE_KEY, admin=False, now=rt.clock())
    return str(secret)


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def create(ns: argparse.Namespace) -> None:
    """A new key; shown once (only its hash is stored)."""
    from ..server.api_keys import issue

    opts = Options.parse(ns)
    with opts.runtime(create=True, templates=False) as rt:
        record, secret = issue(
            rt, scope_for(None), ns.name, name=ns.name, admin=ns.admin, now=rt.clock()
        )
    if opts.as_json:
        opts.emit(
            {
                "user_id": record.user_id,
                "name": record.name,
                "api_key": secret,
                "key_id": record.id,
                "admin": record.admin,
            }
        )
        return
    kind = "admin key" if record.admin else "key"
    print(f"API {kind} {record.id} for {record.user_id} (shown once, keep it):")
    print(secret)


def revoke(ns: argparse.Namespace) -> None:
    if not ns.name and not ns.key:
        raise InvalidInput("users revoke", "name a user, or --key KEY_ID")
    opts = Options.parse(ns)
    with opts.runtime(create=False, templates=False) as rt:
        count = rt.revoke_api_keys(scope_for(None), user_id=ns.name, key_id=ns.key)
    if opts.as_json:
        opts.emit({"revoked": count})
    else:
        print(f"Revoked {count} API key{'s' if count != 1 else ''}.")


def list_keys(ns: argparse.Namespace) -> None:
    opts = Options.parse(ns)
    with opts.runtime(create=False, templates=False) as rt:
        found = rt.api_keys(scope_for(None))
    rows = [
        {
            "key_id": k.id,
            "user_id": k.user_id,
            "name": k.name,
            "admin": k.admin,
            "created_at": k.created_at.isoformat(),
            "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
        }
        for k in found
    ]
    if opts.as_json:
        opts.emit(rows)
        return
    for row in rows:
        state = "revoked" if row["revoked_at"] else "active"
        admin = " admin" if row["admin"] else ""
        sys.stdout.write(f"{row['key_id']}  {row['user_id']}{admin}  {state}\n")
