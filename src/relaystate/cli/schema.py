"""``relaystate db status|upgrade``: the store's SQL schema version and its migrations."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Options, scope_for, store_parser

if TYPE_CHECKING:
    from ..errors import StoreURLError
    from ..runtime.runtime import Runtime


def register(commands: Any) -> None:
    group = commands.add_parser("db", help="The store's database schema: version, upgrades.")
    sub = group.add_subparsers(title="commands", metavar="COMMAND", parser_class=type(group))
    group.set_defaults(run=lambda ns: group.error("name a db command"))
    p = sub.add_parser("status", parents=[store_parser()], help="Schema version and pending steps.")
    p.set_defaults(run=status)
    p = sub.add_parser("upgrade", parents=[store_parser()], help="Apply pending migrations.")
    p.set_defaults(run=upgrade)


def _runtime(opts: Options, *, create: bool) -> Runtime:
    """The store, opened without upgrading its schema (these commands do that themselves)."""
    from ..runtime.runtime import Runtime

    return Runtime(opts.stores(migrate=False, create=create), [], build="cli")


def _no_schema(opts: Options) -> StoreURLError:
    from ..errors import StoreURLError

    return StoreURLError(f"{opts.store} keeps no database schema: nothing to migrate")


def status(ns: argparse.Namespace) -> None:
    """The schema version of the store's database, the latest one, and the steps between."""
    opts = Options.parse(ns)
    with _runtime(opts, create=False) as rt:
        found = rt.schema_status(scope_for(None))
    if found is None:
        raise _no_schema(opts)
    if opts.as_json:
        opts.emit(found.to_dict())
    elif found.too_new:
        print(
            f"Schema version {found.current} is newer than this relaystate knows "
            f"({found.latest}): upgrade relaystate before using this database."
        )
    elif found.up_to_date:
        print(f"Schema version {found.current}: up to date.")
    else:
        print(f"Schema version {found.current} of {found.latest}; pending:")
        for step in found.pending:
            print(f"  {step.label}")
        print("Run `relaystate db upgrade` (or open the store) to apply them.")


def upgrade(ns: argparse.Namespace) -> None:
    """Apply pending schema migrations, in order, each in its own transaction."""
    opts = Options.parse(ns)
    operator = scope_for(None)
    with _runtime(opts, create=True) as rt:
        before = rt.schema_status(operator)
        applied = rt.upgrade_schema(operator)
        after = rt.schema_status(operator)
    if before is None or after is None:
        raise _no_schema(opts)
    if opts.as_json:
        opts.emit(
            {
                "backend": after.backend,
                "from": before.current,
                "to": after.current,
                "latest": after.latest,
                "applied": [s.to_dict() for s in applied],
            }
        )
        return
    for step in applied:
        print(f"Applied {step.label}.")
    if applied:
        print(f"Schema upgraded from version {before.current} to {after.current}.")
    else:
        print(f"Schema version {after.current}: already up to date.")
