"""``relaystate memory import|search`` as real processes over a real SQLite file: the JSON
Lines formats of the issue, scoped by user and namespace; a bad file is one error line, exit
code 2, and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "relaystate.cli", "memory", *args, "--store", store]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


ITEMS = [
    {
        "id": "D1:1",
        "text": "Caroline: I went to a LGBTQ support group yesterday",
        "time": "2023-05-08T13:56:00",
    },
    {
        "id": "D1:2",
        "text": "Melanie: I painted a sunrise over the lake last week",
        "metadata": {"speaker": "Melanie"},
    },
    {"id": "D1:3", "text": "Caroline: 我下个月想去北京看长城"},
]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/mem.db"


def test_import_then_search_one_query_or_a_file_of_them(tmp_path: Path, store: str) -> None:
    items = jsonl(tmp_path / "items.jsonl", ITEMS)
    done = cli(
        "import",
        "--user",
        "u1",
        "--namespace",
        "conv",
        str(items),
        "--embedder",
        "hash",
        store=store,
    )
    assert done.returncode == 0, done.stderr
    assert "Imported 3 items into u1/conv (3 in all, 3 embedded)" in done.stdout
    found = cli(
        "search",
        "--user",
        "u1",
        "--namespace",
        "conv",
        "--json",
        "What did Melanie paint?",
        store=store,
    )
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["id"] == "D1:2" and hits[0]["text"] == ITEMS[1]["text"] and hits[0]["score"] > 0
    queries = jsonl(
        tmp_path / "q.jsonl", [{"id": "q1", "text": "support group"}, {"id": "q2", "text": "长城"}]
    )
    lines = cli(
        "search",
        "--user",
        "u1",
        "--namespace",
        "conv",
        "--queries",
        str(queries),
        "--k",
        "1",
        "--mode",
        "keyword",
        store=store,
    )
    assert lines.returncode == 0, lines.stderr
    rows = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [(r["query_id"], [h["id"] for h in r["hits"]]) for r in rows] == [
        ("q1", ["D1:1"]),
        ("q2", ["D1:3"]),
    ]
    assert set(rows[0]["hits"][0]) == {"id", "score", "text"}
    assert rows[0]["embedder"] is None  # --mode keyword compares no vectors, and says so
    hybrid = cli("search", "--user", "u1", "--namespace", "conv", "--json", "group", store=store)
    assert json.loads(hybrid.stdout)["embedder"] == "hash:v2:512"  # the suite's embedder
    plain = cli("search", "--user", "u1", "--namespace", "conv", "group", store=store)
    assert plain.stdout.rstrip().endswith("(vectors: hash:v2:512)")
    other = cli(
        "search", "--user", "u2", "--namespace", "conv", "--json", "support group", store=store
    )
    assert json.loads(other.stdout)["hits"] == []  # another user's memory is not there
    again = cli(
        "import",
        "--user",
        "u1",
        "--namespace",
        "conv",
        str(items),
        "--json",
        "--embedder",
        "none",
        store=store,
    )
    assert json.loads(again.stdout) == {"imported": 3, "embedded": 0, "layers": 0, "total": 3}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"id": "a", "text": "ok"}\nnot json\n', "line 3: not JSON"),
        ('{"id": "a", "text": "ok"}\n[1, 2]\n', "line 3: must be a JSON object"),
        ('{"id": "a"}\n', "line 2: 'text' must be non-empty text"),
        ('{"id": "a", "text": "x", "time": "soon"}\n', "line 2: 'time' is not an ISO 8601 time"),
        ('{"id": "a", "text": "x", "colour": 1}\n', "line 2: unknown field 'colour'"),
        ('{"id": "a\\nb", "text": "x"}\n', "id"),
        ('{"id": "a", "text": "x\\u0000"}\n', "NUL"),
    ],
)
def test_a_bad_file_is_one_error_line_and_writes_nothing(
    tmp_path: Path, store: str, content: str, says: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "first", "text": "a good line first"}\n' + content)
    done = cli("import", "--user", "u1", "--namespace", "conv", str(bad), store=store)
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and says in line, line
    assert not (tmp_path / "mem.db").exists()  # refused before the store was opened


def test_bad_search_arguments_exit_2(tmp_path: Path, store: str) -> None:
    for args in (
        ["search", "--user", "u1", "--namespace", "conv"],
        ["search", "--user", "u1", "--namespace", "conv", "x", "--k", "0"],
        ["search", "--user", "u1", "--namespace", "conv", "x", "--embedder", "word2vec"],
        ["import", "--user", "u1", "--namespace", "conv", str(tmp_path / "missing.jsonl")],
    ):
        done = cli(*args, store=store)
        assert done.returncode == 2 and done.stderr.startswith("error: "), (args, done.stderr)
        assert "Traceback" not in done.stderr
