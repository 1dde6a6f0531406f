"""The fixtures every role suite shares: the store bundle under test, opened through the
backend's own ``open_stores`` fixture, and closed again after each test.

A suite class names its backend once::

    class TestMyStore(StoreSuite):
        @pytest.fixture
        def open_stores(self, tmp_path):
            return lambda: Stores.of(MyBackend(tmp_path / "data"))

``open_stores`` returns a function that opens a new bundle on the same data each time it
is called (a second handle on one file or database: some tests reopen a store, or open two
at once to see that they lock each other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from ..store import Stores

R = TypeVar("R")


class Conformance:
    """The base of every role suite: the fixtures a role's tests are given."""

    @pytest.fixture
    def open_stores(self) -> Callable[[], Stores]:
        """The backend under test, as a function that opens its bundle: a suite class that
        runs the role tests must define this fixture."""
        raise NotImplementedError(
            f"{type(self).__name__} must define an open_stores fixture returning a function "
            "that opens the store bundle under test"
        )

    @pytest.fixture
    def made(self) -> Iterator[list[Stores]]:
        """The store bundles a test opened; all closed when it ends."""
        bundles: list[Stores] = []
        yield bundles
        for stores in bundles:
            stores.close()

    @pytest.fixture
    def opened(self, open_stores: Callable[[], Stores], made: list[Stores]) -> Callable[[], Stores]:
        """Open another bundle on the same data (closed at the end of the test)."""

        def open_() -> Stores:
            made.append(open_stores())
            return made[-1]

        return open_

    @pytest.fixture
    def bundle(self, opened: Callable[[], Stores]) -> Stores:
        """The bundle under test; its roles are the role fixtures."""
        return opened()


def required(role: R | None, name: str) -> R:
    """A role the bundle must play for this suite, or a failure saying it does not."""
    if role is None:
        pytest.fail(f"the store plays no {name} role: leave this role's suite out of the class")
    return role
