"""The leave-one-conversation-out benchmark: its selection scores each held-out conversation
with the config best on the others (not the one best on all), the script runs end to end on
a slice, and our second dev set is well formed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "locomo_loo.py"
DEV2 = ROOT / "bench" / "data" / "dev2.json"


def bench() -> ModuleType:
    """bench/locomo_loo.py as a module (it imports benchlib and locomo_data from its folder)."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("locomo_loo_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def table(any10: list[list[float]], convs: list[str], multi_hop: list[bool] | None = None) -> Any:
    loo = bench()
    a = np.array(any10, dtype=float)
    mh = np.array(multi_hop or [False] * len(convs), dtype=bool)
    return loo.ScoreTable(convs, mh, a, a.copy(), a.copy())


def test_each_held_out_conversation_gets_the_config_best_on_the_others() -> None:
    # configs: 0 = defaults (never finds anything), 1 and 2; config 1 is best on all six
    # questions (3/6 against 2/6), but without conversation A the others prefer config 2
    convs = ["A", "A", "B", "B", "C", "C"]
    scores = table(
        [[0, 1, 0], [0, 1, 0], [0, 1, 1], [0, 0, 0], [0, 0, 1], [0, 0, 0]],
        convs,
    )
    everyone = np.ones(len(convs), dtype=bool)
    assert int(np.argmax(scores.criterion(everyone))) == 1
    chosen = scores.loo_choices()
    assert chosen == {"A": 2, "B": 1, "C": 1}
    held_out = scores.loo_column(chosen).figures()
    assert held_out["any@10"] == 1 / 6  # only B's first question, under config 1
    assert scores.figures(1)["any@10"] == 3 / 6


def test_ties_go_to_the_defaults_and_multi_hop_counts_in_the_criterion() -> None:
    # config 1 equals the defaults on any@10; its edge is multi-hop all@10 only
    loo = bench()
    convs = ["A", "B", "C"]
    any10 = np.ones((3, 2))
    all10 = np.array([[0, 1], [0, 1], [0, 0]], dtype=float)
    mh = np.array([True, True, False])
    scores = loo.ScoreTable(convs, mh, any10, all10, any10.copy())
    assert scores.loo_choices() == {"A": 1, "B": 1, "C": 1}
    flat = loo.ScoreTable(convs, mh, any10, np.zeros((3, 2)), any10.copy())
    assert flat.loo_choices() == {"A": 0, "B": 0, "C": 0}


def test_the_grid_is_a_priori_and_starts_with_the_defaults() -> None:
    loo = bench()
    from relaystate.memory.recall import DEFAULT_WEIGHTS

    assert loo.GRID[0] == DEFAULT_WEIGHTS
    assert len(loo.GRID) == len(set(loo.GRID)) <= 70
    assert all(w in loo.GRID for w in loo.ABLATIONS.values())


def test_the_script_runs_on_a_slice_and_prints_the_table(tmp_path: Path) -> None:
    out = tmp_path / "loo.json"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "220"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--conversations", "1", "--json", str(out)],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = done.stdout
    assert "Leave-one-conversation-out" in text and "Defaults:" in text
    results = json.loads(out.read_text(encoding="utf-8"))["results"]
    names = {r["dataset"] for r in results}
    assert "dev2" in names
    if Path("/work/shared/data/locomo-dev.json").exists() or os.environ.get("LOCOMO_PATH"):
        assert "LoCoMo dev" in names
    for r in results:
        assert r["dataset"] in text
        assert r["embedder"] == "hash"
        assert len(r["conversations"]) == 1
        for figure in ("default", "best", "loo"):
            for metric in ("any@10", "mrr"):
                assert 0.0 <= r[figure][metric] <= 1.0
        assert r["default"]["any@10"] > 0.3
        assert r["same_as_search"] == r["checked"] > 0


def test_dev2_is_well_formed() -> None:
    doc = json.loads(DEV2.read_text(encoding="utf-8"))
    assert "CC0" in doc["license"] and "hand-written" in doc["about"]
    samples = doc["samples"]
    assert len(samples) >= 6
    langs = [s["lang"] for s in samples]
    assert sum(lang == "en" for lang in langs) >= 3
    assert sum(lang.startswith("zh") for lang in langs) >= 3
    assert {"zh-Hans", "zh-Hant"} <= set(langs)
    ids = [s["sample_id"] for s in samples]
    assert len(set(ids)) == len(ids)
    sys.path.insert(0, str(ROOT / "bench"))
    from locomo_data import load, session_time

    for s in samples:
        c = s["conversation"]
        sessions = [k for k in c if k.startswith("session_") and isinstance(c[k], list)]
        assert 3 <= len(sessions) <= 5, s["sample_id"]
        turns = {t["dia_id"]: t for k in sessions for t in c[k]}
        assert 40 <= len(turns) <= 90, s["sample_id"]
        assert {t["speaker"] for t in turns.values()} == {c["speaker_a"], c["speaker_b"]}
        for k in sessions:
            session_time(c[f"{k}_date_time"])
        assert 12 <= len(s["qa"]) <= 20, s["sample_id"]
        assert {q["category"] for q in s["qa"]} == {1, 2, 3, 4}, s["sample_id"]
        for q in s["qa"]:
            assert q["evidence"] and all(e in turns for e in q["evidence"]), q
            if q["category"] == 1:
                assert len(q["evidence"]) >= 2, q
        cross = [
            q
            for q in s["qa"]
            if q["category"] == 1 and len({e.split(":")[0] for e in q["evidence"]}) > 1
        ]
        assert len(cross) >= 3, s["sample_id"]
    convs, questions, stats = load(DEV2)
    assert len(convs) == len(samples)
    assert len(questions) == sum(len(s["qa"]) for s in samples)
    assert not stats.dropped_ids and not stats.fixed_ids and not stats.skipped_no_evidence
