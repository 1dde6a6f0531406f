"""A PostgreSQL store URL: libpq's own, plus relaystate's options, taken out before connecting.

``postgresql://user:password@host:port/dbname?pool_size=10&pooler=transaction``

- ``pool_size``: the most connections this process opens (default 10).
- ``pooler``: ``none`` (default) or ``transaction``, for a connection pooler in transaction
  mode between relaystate and the server (PgBouncer's ``pool_mode = transaction``, what
  most fleets run). In that mode two statements of one client may reach two different
  server connections, so nothing may live on a server connection across statements:
  relaystate never uses session state there (only transaction-level advisory locks, no
  ``LISTEN``, no ``SET`` outside a transaction), and this option also turns psycopg's
  server-side prepared statements off (PgBouncer 1.18, Debian 12's, cannot carry them).

Every other option goes to libpq as it is (``sslmode``, ``connect_timeout``,
``target_session_attrs``...). Several hosts (``postgresql://h1:5432,h2:5432/db?
target_session_attrs=read-write``) let libpq find the primary after a failover.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import StoreURLError

DEFAULT_POOL_SIZE = 10
POOLERS = ("none", "transaction")
TCP_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "15000",
}
"""libpq options set unless the URL sets them: a connection into a network partition is
known dead within about 20 s (an idle one by keepalives, one with a statement in flight by
tcp_user_timeout) instead of the kernel's 15 minutes of retransmissions."""


@dataclass(frozen=True)
class PostgresURL:
    """What to connect to, and how."""

    conninfo: str
    """The URL for libpq, without relaystate's options."""
    pool_size: int = DEFAULT_POOL_SIZE
    pooler: str = "none"

    @property
    def prepare_threshold(self) -> int | None:
        """psycopg's: prepare a statement on the server after 5 runs; never behind a
        transaction-mode pooler (the next run may reach another server connection)."""
        return None if self.pooler == "transaction" else 5

    @classmethod
    def parse(cls, url: str) -> PostgresURL:
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # e.g. an unclosed IPv6 bracket
            raise StoreURLError(f"bad store URL {redact(url)!r}: {exc}") from None
        options = parse_qsl(parts.query, keep_blank_values=True)
        size, pooler = DEFAULT_POOL_SIZE, "none"
        for key, value in options:
            if key == "pool_size":
                if not value.isascii() or not value.isdigit() or int(value) < 1:
                    raise StoreURLError(
                        "store URL option pool_size must be a whole number of at least 1: "
                        f"{value!r}"
                    )
                size = int(value)
            elif key == "pooler":
                if value not in POOLERS:
                    raise StoreURLError(
                        f"store URL option pooler must be one of {', '.join(POOLERS)}: {value!r}"
                    )
                pooler = value
        kept_options = [(k, v) for k, v in options if k not in ("pool_size", "pooler")]
        named = {k for k, _ in kept_options}
        kept_options += [(k, v) for k, v in TCP_DEFAULTS.items() if k not in named]
        kept = urlencode(kept_options)
        return cls(urlunsplit(parts._replace(query=kept)), size, pooler)


def redact(url: str) -> str:
    """The URL without its password, fit for messages and logs."""
    url = re.sub(r"^([a-z]+://[^:/@]*):[^@/]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url)
