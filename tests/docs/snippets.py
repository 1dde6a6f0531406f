"""The code blocks of the README and the docs, read as a reader would run them.

- A page runs top to bottom, in a fresh directory of its own (with ``examples/`` in it, as
  at the repository's root), with the clock pinned
  (``RELAYSTATE_NOW``): ``python`` blocks in one namespace (a ``text`` block titled
  ``Output`` right after one is what it must print), and ``console`` blocks, where each
  ``$ command`` runs in a shell (the venv's ``relaystate`` first on the PATH) and the lines
  after it are what it must print.
- ``sh`` blocks are synopses: every ``relaystate ...`` line names a command that exists
  and options that command takes.
- In expected output, ``...`` stands for any text (within a line, or whole lines).

A block preceded by ``<!-- not run: why -->`` is only compiled: a fragment that cannot run
by itself (the reason says why). Other languages (json, nginx, text) are not run.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.DOTALL | re.MULTILINE,
)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>[^>]*?)\s*-->\s*$")
NOW = "2026-12-01T10:00:00"


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    attrs: str
    code: str
    output: str | None = None
    """The ``Output`` block that follows, if any."""
    not_run: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README, RELIABILITY.md and every page of the docs, examples' READMEs too."""
    found = [ROOT / "README.md", ROOT / "RELIABILITY.md", ROOT / "CHANGELOG.md"]
    found += sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "examples").rglob("*.md"))
    return [p for p in found if p.exists()]


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found: list[Block] = []
    for match in FENCE.finditer(text):
        indent = match["indent"]
        body = "".join(
            line[len(indent) :] if line.startswith(indent) else line
            for line in match["body"].splitlines(keepends=True)
        )
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skipped = NOT_RUN.search(before)
        block = Block(
            page,
            text.count("\n", 0, match.start()) + 1,
            match["lang"],
            match["attrs"].strip(),
            body,
            not_run=skipped["why"] if skipped else None,
        )
        if (
            found
            and block.lang == "text"
            and 'title="Output"' in block.attrs
            and found[-1].lang in ("python", "py")
        ):
            found[-1].output = block.code
            continue
        found.append(block)
    return found


def matches(expected: str, got: str) -> bool:
    """Whether ``got`` is ``expected`` with each ``...`` standing for any text."""
    pattern = ".*?".join(re.escape(part) for part in expected.strip().split("..."))
    return re.fullmatch(pattern, got.strip(), re.DOTALL) is not None


def run_page(blocks: list[Block], where: Path) -> None:
    """Run a page's python and console blocks in order, in ``where``."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    (where / "examples").symlink_to(ROOT / "examples")  # as from the repository's root
    old = Path.cwd()
    os.chdir(where)
    sys.path.insert(0, str(where))
    try:
        for block in blocks:
            if block.lang == "console":
                if block.not_run is None:
                    run_console(block, where)
                continue
            code = compile(block.code, block.where, "exec")
            if block.not_run is not None:
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            if block.output is not None:
                assert matches(block.output, out.getvalue()), (
                    f"{block.where} printed:\n{out.getvalue()}\nnot what the page says:\n"
                    f"{block.output}"
                )
    finally:
        os.chdir(old)
        sys.path.remove(str(where))


def run_console(block: Block, where: Path) -> None:
    """Each ``$ command`` of a console block, with what it must print."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    assert steps, f"{block.where}: a console block with no $ command"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "RELAYSTATE_NOW": NOW,
        "COLUMNS": "100",
        "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)]),
    }
    for command, expected in steps:
        done = subprocess.run(
            command, shell=True, cwd=where, env=env, capture_output=True, text=True, timeout=120
        )
        got = done.stdout + done.stderr
        wanted = "\n".join(expected)
        failing = wanted.lstrip().startswith("error:")
        assert (done.returncode != 0) == failing, (
            f"{block.where}: `{command}` exited {done.returncode}:\n{got}"
        )
        assert matches(wanted, got), (
            f"{block.where}: `{command}` printed:\n{got}\nnot what the page says:\n{wanted}"
        )


OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def synopsis_claims(block: Block) -> list[tuple[list[str], list[str]]]:
    """Each ``relaystate ...`` line of a synopsis: its command words and the options named."""
    claims = []
    for raw in block.code.splitlines():
        line = raw.split("#", 1)[0].strip()
        line = line.removeprefix("$ ")
        if not line.startswith("relaystate "):
            continue
        words: list[str] = []
        for word in line.split()[1:]:
            if word.startswith(("-", "[", "<", "$", '"', "'")) or not re.fullmatch(r"[a-z]+", word):
                break
            words.append(word)
        claims.append((words, OPTION.findall(line)))
    return claims
