"""``relaystate init NAME``: a project of one's own, which runs and passes its own test at
once, in a fresh directory, with nothing but relaystate installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .support import cli


def test_init_writes_an_agent_that_talks_and_passes_its_test(tmp_path: Path) -> None:
    made = cli("init", "helpdesk", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in (tmp_path / "helpdesk").iterdir()) == [
        "README.md",
        "__init__.py",
        "agent.py",
        "test_agent.py",
    ]
    assert "relaystate chat --app helpdesk.agent:templates" in made.stdout
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "helpdesk"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout[-2000:]
    assert "2 passed" in tested.stdout
    env = {"RELAYSTATE_NOW": "2026-12-01T10:00:00"}
    app = ["--app", "helpdesk.agent:templates", "--user", "me", "--session", "s1"]
    replies = [
        cli("say", *app, text, cwd=tmp_path, env=env).stdout.strip()
        for text in ("I need help, the VPN drops", "Grace Hopper", "tomorrow", "yes")
    ]
    assert replies[:2] == ["Who is the request for?", "Which day suits you?"]
    assert replies[3].startswith("Done") and "REQ-00001" in replies[3]
    assert "Grace Hopper" in (tmp_path / "helpdesk-requests.jsonl").read_text()
    zh = ["--app", "helpdesk.agent:templates", "--user", "wang", "--session", "s2"]
    first = cli("say", *zh, "我需要帮忙，打印机坏了", cwd=tmp_path, env=env)
    assert first.stdout.strip() == "请问您的姓名？"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Helpdesk", "no package name"),
        ("my-agent", "no package name"),
        ("class", "Python keeps"),
        ("json", "already an installed module"),
        ("relaystate", "already an installed module"),
    ],
)
def test_a_name_that_would_clash_is_refused(tmp_path: Path, name: str, message: str) -> None:
    refused = cli("init", name, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("error: ")
    assert message in refused.stderr
    assert list(tmp_path.iterdir()) == []


def test_init_never_writes_over_a_folder(tmp_path: Path) -> None:
    (tmp_path / "helpdesk").mkdir()
    (tmp_path / "helpdesk" / "mine.txt").write_text("keep me")
    refused = cli("init", "helpdesk", cwd=tmp_path)
    assert refused.returncode == 2 and "already exists" in refused.stderr
    assert [p.name for p in (tmp_path / "helpdesk").iterdir()] == ["mine.txt"]
