"""The documentation site builds offline and strict (every internal link and anchor checked),
and its generated pages cover what the code has: every command, every endpoint."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from relaystate.cli import parser

from .snippets import ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(where)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert "WARNING" not in built.stderr, built.stderr[-4000:]
    return where


def commands(cmd: argparse.ArgumentParser, words: list[str]) -> list[str]:
    found = []
    for action in cmd._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(" ".join([*words, name]))
                found += commands(sub, [*words, name])
    return found


def test_every_command_has_its_entry(site: Path) -> None:
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    missing = [c for c in commands(parser(), ["relaystate"]) if f"<code>{c}</code>" not in page]
    assert missing == []


def test_every_endpoint_has_its_entry_and_the_schema_is_published(site: Path) -> None:
    spec = json.loads((site / "openapi.json").read_text(encoding="utf-8"))
    page = (site / "api-reference" / "index.html").read_text(encoding="utf-8")
    shown = [f"{m.upper()} {p}" for p, ms in spec["paths"].items() for m in ms]
    assert len(shown) >= 20
    assert [s for s in shown if s not in page] == []


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    loaded = re.compile(r'<(?:script|link|img)[^>]+(?:src|href)="(https?:)?//', re.IGNORECASE)
    offenders = [
        str(path.relative_to(site))
        for path in site.rglob("*.html")
        if loaded.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_reference_pages_are_drawn_from_the_code(site: Path) -> None:
    api = (site / "python-api" / "index.html").read_text(encoding="utf-8")
    for name in ("TaskTemplate", "opening_slot", "filled_by", "rerun", "Retry", "Conflict"):
        assert name in api, name
    reliability = (site / "reliability" / "index.html").read_text(encoding="utf-8")
    assert "Exactly once" in reliability and 'href="../concepts/#the-invariants"' in reliability
