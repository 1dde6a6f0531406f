"""The whole conformance suite: every role's tests in one class to inherit.

A backend that plays every role inherits :class:`StoreSuite`; one that plays some roles
(a session cache in front of a database) inherits the role suites it plays, each with the
same ``open_stores`` fixture (see :mod:`relaystate.testing.fixtures`). Finer differences
between backends are the ``capabilities`` flags of ``relaystate.store.roles`` (``DURABLE``,
``SHARED``...): a test that needs one is skipped, with the reason, where it is missing.
"""

from __future__ import annotations

from .coordination import CoordinationRoleTests
from .identities import IdentityRoleTests
from .memories import MemoryRoleTests
from .schema import SchemaRoleTests
from .sessions import SessionRoleTests
from .tasks import TaskRoleTests
from .turns import TurnRoleTests
from .work_queue import WorkQueueTests
from .working import WorkingMemoryRoleTests


class StoreSuite(
    TaskRoleTests,
    SessionRoleTests,
    TurnRoleTests,
    CoordinationRoleTests,
    WorkQueueTests,
    IdentityRoleTests,
    MemoryRoleTests,
    WorkingMemoryRoleTests,
):
    """Every role's tests but the schema's: inherit it and define ``open_stores``."""


ROLE_SUITES: tuple[type, ...] = StoreSuite.__bases__
"""Every role a durable store plays; ``SchemaRoleTests`` is apart: only a store that
migrates its own SQL schema plays it."""


class SQLStoreSuite(StoreSuite, SchemaRoleTests):
    """Every role's tests, the schema's too: for a store with versioned SQL migrations."""
