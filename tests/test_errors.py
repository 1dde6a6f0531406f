"""Error families a caller can catch: ``Conflict`` (HTTP 409), ``StoreError`` (503),
``NotFound`` (404); the HTTP API answers by the family."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import relaystate.errors as errors
from relaystate import (
    Conflict,
    NotFound,
    RelaystateError,
    Runtime,
    Scope,
    Slot,
    Stage,
    StoreError,
    TaskTemplate,
    all_required_slots,
    open_store,
)
from relaystate.server.errors import status_of

ALICE = Scope.user("alice")

ERRORS = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, RelaystateError) and cls.__module__ == errors.__name__
]


def blank(cls: type[RelaystateError]) -> RelaystateError:
    """An instance without running ``__init__`` (each takes other arguments)."""
    return cls.__new__(cls)


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_the_status_follows_the_family(cls: type[RelaystateError]) -> None:
    status, code = status_of(blank(cls))
    assert (status == 409) == issubclass(cls, Conflict)
    assert (status == 404) == issubclass(cls, NotFound)
    if issubclass(cls, StoreError):
        assert (status, code) == (503, "unavailable")
    assert code and code != "internal"


def test_a_new_kind_of_conflict_is_a_409_without_a_line_in_the_server() -> None:
    class Overbooked(Conflict):
        pass

    assert status_of(Overbooked("the flight is full")) == (409, "conflict")


def test_a_caller_catches_a_locked_task_as_a_conflict(tmp_path: Path) -> None:
    note = TaskTemplate(
        "note",
        slots=[Slot("text")],
        stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
    )
    with Runtime(open_store(f"sqlite:///{tmp_path}/store.db"), [note]) as runtime:
        done = runtime.start(ALICE, "note", slots={"text": "milk"})
        assert done.task.status == "done"
        with pytest.raises(Conflict) as caught:
            runtime.fill(ALICE, done.task.id, {"text": "bread"})
        assert type(caught.value).__name__ == "TaskLocked"
        with pytest.raises(NotFound):
            runtime.task(Scope.user("mallory"), done.task.id)


def test_a_file_that_is_no_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, just notes\n" * 10)
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{path}")
    assert str(path) in str(caught.value)
    assert path.read_text().startswith("not a database")
