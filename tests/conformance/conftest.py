"""Every store backend, and the roles the conformance suite checks it for.

A backend joins by adding a factory and its roles here; the tests never name a backend.
Each role's tests (``tasks/``, ``sessions/``, ``turns/``, ``coordination/``, ``schema/``,
``identities/``, ``memories/``, ``working/``)
run against every backend that plays the role. ``turns`` is the bundle: a task commit that
carries its session and messages. PostgreSQL and Redis come from the session servers in
tests/conftest.py (skipped where they cannot run, a failure under CI=true).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from relaystate.store import Stores, open_store

ROLES = (
    "tasks",
    "sessions",
    "turns",
    "coordination",
    "schema",
    "identities",
    "memories",
    "working",
)
SOLO = frozenset(
    {"tasks", "sessions", "turns", "coordination", "identities", "memories", "working"}
)


@dataclass(frozen=True)
class Backend:
    open: Callable[[pytest.FixtureRequest], Stores]
    roles: frozenset[str]


def _sqlite(request: pytest.FixtureRequest) -> str:
    return f"sqlite:///{request.getfixturevalue('tmp_path')}/conformance.db"


def _postgres(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("postgres_url"))


def _redis(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("redis_url"))


BACKENDS: dict[str, Backend] = {
    "memory": Backend(lambda r: open_store("memory://"), SOLO),
    "sqlite": Backend(lambda r: open_store(_sqlite(r)), SOLO | {"schema"}),
    "postgres": Backend(lambda r: open_store(_postgres(r)), SOLO | {"schema"}),
    # Redis plays the session role alone, in front of a durable store.
    "sqlite+redis": Backend(
        lambda r: open_store(_sqlite(r), cache=_redis(r)), frozenset({"sessions", "turns"})
    ),
    "postgres+redis": Backend(
        lambda r: open_store(_postgres(r), cache=_redis(r)), frozenset({"sessions", "turns"})
    ),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for role in ROLES:
        if role in metafunc.fixturenames:
            names = [n for n, b in BACKENDS.items() if role in b.roles]
            metafunc.parametrize(role, names, indirect=True)


@pytest.fixture
def made() -> Iterator[list[Stores]]:
    """The store bundles a test opened, first the one its role fixture came from."""
    bundles: list[Stores] = []
    yield bundles
    for stores in bundles:
        stores.close()


@pytest.fixture
def opened(request: pytest.FixtureRequest, made: list[Stores]) -> Callable[[str], Stores]:
    """Open (more) store bundles of one backend; all closed at the end of the test."""

    def open_(name: str) -> Stores:
        made.append(BACKENDS[name].open(request))
        return made[-1]

    return open_


@pytest.fixture
def bundle(made: list[Stores]) -> Stores:
    """The whole bundle behind the role under test (to set up data another role keeps)."""
    return made[0]


def _role_fixture(role: str) -> Callable[[pytest.FixtureRequest], object]:
    """The fixture that opens a backend and hands over the object playing ``role``."""

    @pytest.fixture(name=role)
    def fixture(request: pytest.FixtureRequest) -> object:
        stores: Stores = request.getfixturevalue("opened")(request.param)
        return stores if role == "turns" else getattr(stores, role)

    return fixture


tasks = _role_fixture("tasks")
sessions = _role_fixture("sessions")
turns = _role_fixture("turns")
coordination = _role_fixture("coordination")
schema = _role_fixture("schema")
identities = _role_fixture("identities")
memories = _role_fixture("memories")
working = _role_fixture("working")


@pytest.fixture
def backend_name(request: pytest.FixtureRequest) -> str:
    """The backend the current role fixture was opened on (to open a second one)."""
    for role in ROLES:
        if role in request.fixturenames:
            return str(request.node.callspec.params[role])
    raise LookupError("no role fixture in this test")
