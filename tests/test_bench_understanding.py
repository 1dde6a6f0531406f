"""The understanding benchmark scores every set it names: each set of ours loads, its cases
are well formed, its first-seen score is recorded in its file, and a whole run writes a
score for every set."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "understanding.py"


def bench() -> ModuleType:
    """bench/understanding.py as a module (it imports benchlib from its own folder)."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("understanding_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


OWN_SETS = [n for n in bench().SET_NAMES if n != "sample"]


@pytest.mark.parametrize("name", OWN_SETS)
def test_each_set_loads_well_formed_with_its_first_seen_score(name: str, tmp_path: Path) -> None:
    module = bench()
    console = Console(record=True, width=200)
    found = module.load_set(name, console)
    assert found is not None, console.export_text()
    assert found.cases
    assert [p for c in found.cases for p in module.lint_case(c)] == []
    seen = found.first_seen
    assert seen is not None and {"date", "commit", "accuracy"} <= set(seen)
    assert [t.type for t in found.templates(tmp_path / "ledger.db")]


def test_a_whole_run_scores_every_set(tmp_path: Path) -> None:
    out = tmp_path / "understanding.json"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(
        [sys.executable, str(SCRIPT), "--set", "all", "--show-failures", "0", "--json", str(out)],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    results = json.loads(out.read_text(encoding="utf-8"))
    results = results.get("results", results)
    assert set(OWN_SETS) <= set(results["sets"])
    assert results["fields"] > 6000
    assert results["accuracy"] > 0.9
    assert results["errors"] == []
