"""What in a PostgreSQL server's settings could lose a turn relaystate has acknowledged.

A turn is acknowledged once its commit returns. That commit survives a crash of the server
only with ``fsync`` on and ``synchronous_commit`` not ``off``; it survives a failover to a
standby only if the standby had it, that is with synchronous replication
(``synchronous_standby_names`` naming the standby, ``synchronous_commit`` ``on`` or
``remote_apply``; ``remote_write`` survives the primary's crash but not both machines
losing power). Asynchronous replication is the default of PostgreSQL: a promoted standby
may then lack the last commits, and relaystate cannot tell. ``serve`` and ``workers`` print
these at start-up; docs/deployment.md says what to set.
"""

from __future__ import annotations

from typing import Any

import psycopg

_SETTINGS = """
SELECT current_setting('fsync'), current_setting('synchronous_commit'),
       current_setting('synchronous_standby_names'), pg_is_in_recovery(),
       (SELECT count(*) FROM pg_stat_replication)
"""


def warnings(conn: psycopg.Connection[tuple[Any, ...]]) -> list[str]:
    """One sentence per setting that can lose acknowledged turns (none: nothing to say)."""
    row = conn.execute(_SETTINGS).fetchone()
    assert row is not None
    fsync, commit, standbys, in_recovery, replicas = row
    found: list[str] = []
    if in_recovery:
        found.append(
            "the server is a standby in recovery (read-only): every write will fail; point "
            "the store URL at the primary, or list every host with "
            "target_session_attrs=read-write"
        )
    if fsync != "on":
        found.append(
            "fsync is off: a crash of the database server can lose acknowledged turns and "
            "corrupt the database"
        )
    if commit == "off":
        found.append(
            "synchronous_commit is off: a crash of the database server loses the turns of "
            "its last moments although relaystate acknowledged them"
        )
    if replicas and not standbys.strip():
        found.append(
            f"{replicas} standby server(s) replicate asynchronously (synchronous_standby_names "
            "is empty): after a failover the new primary may lack turns this one "
            "acknowledged; set synchronous_standby_names and synchronous_commit = on"
        )
    elif replicas and commit in ("local", "off"):
        found.append(
            f"synchronous_commit is {commit}: commits do not wait for the synchronous "
            "standby, so a failover may lose acknowledged turns; set it to on"
        )
    return found
