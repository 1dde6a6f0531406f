"""Every code block of the README and the docs runs, and prints what the page says it
prints; every command line they show names commands and options that exist (see
``snippets`` for how each kind of block is read)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from relaystate.cli import parser

from . import snippets

PAGES = snippets.pages()
RUNNABLE = [
    p for p in PAGES if any(b.lang in ("python", "py", "console") for b in snippets.blocks(p))
]
SYNOPSES = [
    pytest.param(words, options, id=f"{b.where}:{' '.join(words)}")
    for p in PAGES
    for b in snippets.blocks(p)
    if b.lang in ("sh", "console", "bash")
    for words, options in snippets.synopsis_claims(b)
]


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", snippets.NOW)
    for name in ("RELAYSTATE_STORE", "RELAYSTATE_APP", "RELAYSTATE_MODEL_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(snippets.ROOT)))
def test_a_page_runs_and_prints_what_it_says(page: Path, tmp_path: Path) -> None:
    runnable = [b for b in snippets.blocks(page) if b.lang in ("python", "py", "console")]
    snippets.run_page(runnable, tmp_path)


def _command(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the deepest subcommand ``words`` name, and the words it used."""
    current, used = parser(), []
    for word in words:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        current, used = sub.choices[word], [*used, word]
    return current, used


@pytest.mark.parametrize(("words", "options"), SYNOPSES)
def test_every_command_line_shown_exists(words: list[str], options: list[str]) -> None:
    command, used = _command(words)
    subcommands = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    assert not subcommands or not used or len(used) == len(words), (
        f"relaystate {' '.join(words)}: no such command"
    )
    known = {s for a in command._actions for s in a.option_strings}
    missing = [o for o in options if o not in known]
    assert missing == [], f"relaystate {' '.join(used)} takes no {', '.join(missing)}"


def test_the_claims_are_counted() -> None:
    """The pages make claims the suite checks: at least this many (it grows with the docs)."""
    python = sum(len([b for b in snippets.blocks(p) if b.lang == "python"]) for p in PAGES)
    assert python >= 1 and len(SYNOPSES) >= 20
