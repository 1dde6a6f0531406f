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
Needs pytest (``pip install 'relaystate[testing]'``).
"""

from __future__ import annotations

import pkgutil

import pytest

# before the suites are imported: pytest explains their failed asserts as a test file's own
pytest.register_assert_rewrite(*(f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)))

from .conformance import ROLE_SUITES, SQLStoreSuite, StoreSuite  # noqa: E402
from .coordination import CoordinationRoleTests  # noqa: E402
from .fixtures import Conformance  # noqa: E402
from .identities import IdentityRoleTests  # noqa: E402
from .memories import MemoryRoleTests  # noqa: E402
from .schema import SchemaRoleTests  # noqa: E402
from .sessions import SessionRoleTests  # noqa: E402
from .tasks import TaskRoleTests  # noqa: E402
from .turns import TurnRoleTests  # noqa: E402
from .work_queue import WorkQueueTests  # noqa: E402
from .working import WorkingMemoryRoleTests  # noqa: E402

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
