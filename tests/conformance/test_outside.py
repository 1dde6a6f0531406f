"""The suite as a user runs it: from an installed ``relaystate.testing``, in a test file
outside this repository, against a backend of their own; a backend that breaks a rule fails."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"

USERS_TESTS = '''
import pytest
from relaystate.store import open_store
from relaystate.testing import SessionRoleTests

class NewestFirst:
    """A session store wrapper that hands messages back in the wrong order."""

    def __init__(self, stores):
        self.stores = stores
        self.messages = stores.sessions.messages
        stores.sessions.messages = lambda *a, **k: list(reversed(self.messages(*a, **k)))

class TestMyStore(SessionRoleTests):
    @pytest.fixture
    def open_stores(self, tmp_path):
        url = f"sqlite:///{tmp_path}/mine.db"
        return lambda: open_store(url)

class TestMyBrokenStore(SessionRoleTests):
    @pytest.fixture
    def open_stores(self):
        return lambda: NewestFirst(open_store("memory://")).stores
'''


def pytest_on(folder: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    """Run pytest in a process of its own on one test file written to ``folder``."""
    (folder / name).write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_users_backend_runs_the_suite_from_outside_the_repo(tmp_path: Path) -> None:
    run = pytest_on(tmp_path, "test_my_store.py", USERS_TESTS)
    out = run.stdout
    assert run.returncode == 1, out
    assert "TestMyStore::" not in out.split("short test summary")[-1]  # the honest one passes
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed and all("TestMyBrokenStore" in line for line in failed)
    assert "test_messages_are_numbered_per_session_in_order" in out
    assert "assert [(3, 'c'), (2, 'b'), (1, 'a')] == [(1, 'a'), (2, 'b'), (3, 'c')]" in out


def test_the_docs_example_runs_the_whole_suite(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"```python\n(import pytest\n.*?SQLStoreSuite.*?)```", text, re.DOTALL)
    assert found is not None, "the docs' conformance example is gone"
    run = pytest_on(tmp_path, "test_readme_store.py", found.group(1))
    assert run.returncode == 0, run.stdout[-3000:]
    assert re.search(r"\b\d{2,} passed", run.stdout), run.stdout[-500:]
