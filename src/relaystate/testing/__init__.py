"""The store conformance suite, for any backend: this repository's and a user's own.

Each role a store plays (tasks, sessions, turns, coordination, the work queue, identities,
long-term and working memory, schema) has a suite class of pytest tests; a backend runs them
by inheriting the suites it plays and naming itself in an ``open_stores`` fixture::

    import pytest
    from relaystate.store import Stores
    from relaystate.testing import StoreSuite

    class TestMyStore(StoreSuite):
        @pytest.fixture
        def open_stores(self, tmp_path):
            return lambda: Stores.of(MyBackend(tmp_path / "data"))

``StoreSuite`` holds every role but the schema's (``SQLStoreSuite`` adds it); a partial
backend inherits only the role suites it plays (``SessionRoleTests``, ``TurnRoleTests``...).
Needs pytest (``pip install 'relaystate[testing]'``). Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .conformance import ROLE_SUITES, SQLStoreSuite, StoreSuite
    from .coordination import CoordinationRoleTests
    from .fixtures import Conformance
    from .identities import IdentityRoleTests
    from .memories import MemoryRoleTests
    from .schema import SchemaRoleTests
    from .sessions import SessionRoleTests
    from .tasks import TaskRoleTests
    from .turns import TurnRoleTests
    from .work_queue import WorkQueueTests
    from .working import WorkingMemoryRoleTests

_WHERE = {
    "ROLE_SUITES": "conformance",
    "SQLStoreSuite": "conformance",
    "StoreSuite": "conformance",
    "Conformance": "fixtures",
    "CoordinationRoleTests": "coordination",
    "IdentityRoleTests": "identities",
    "MemoryRoleTests": "memories",
    "SchemaRoleTests": "schema",
    "SessionRoleTests": "sessions",
    "TaskRoleTests": "tasks",
    "TurnRoleTests": "turns",
    "WorkQueueTests": "work_queue",
    "WorkingMemoryRoleTests": "working",
}

# pytest explains a failed assert of these modules as it does a test file's own
pytest.register_assert_rewrite(*sorted({f"{__name__}.{m}" for m in _WHERE.values()}))

__all__ = [
    "ROLE_SUITES",
    "Conformance",
    "CoordinationRoleTests",
    "IdentityRoleTests",
    "MemoryRoleTests",
    "SQLStoreSuite",
    "SchemaRoleTests",
    "SessionRoleTests",
    "StoreSuite",
    "TaskRoleTests",
    "TurnRoleTests",
    "WorkQueueTests",
    "WorkingMemoryRoleTests",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
