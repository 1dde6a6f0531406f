"""Traditional and Simplified Chinese are one language to memory search: 頭髮 finds 头发 by
keyword and by hybrid search (hash embedder) on every backend; other text is untouched;
OpenCC loads only when Chinese is met; a store indexed before the fold finds Traditional by
Simplified after ``relaystate memory reindex``."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from relaystate import Scope, open_store
from relaystate.memory.embed import HashEmbedder
from relaystate.memory.longterm import LongTermMemory
from relaystate.model import MemoryItem
from relaystate.store import Stores
from relaystate.store.scripts import fold, unfolded
from relaystate.store.terms import index_text, query_terms

T0 = datetime(2024, 5, 1, tzinfo=UTC)
ALICE = Scope.user("alice")
ITEMS = {
    "hair": "我的頭髮比較乾燥，理髮師建議用護髮乳。",  # Traditional
    "passport": "我的护照明年三月到期，要去外交部续办。",  # Simplified
    "laptop": "我的筆記型电脑是 ThinkPad X1，保固到 2026 年。",  # both scripts
    "dog": "小狗叫豆豆，每年十月打狂犬病疫苗。",  # the same in both scripts
    "english": "Melanie painted a sunrise over the lake",
}


def memory(stores: Stores, embedder: HashEmbedder | None = None) -> LongTermMemory:
    return LongTermMemory(stores.memories, clock=lambda: T0, embedder=embedder)


def add(mem: LongTermMemory) -> None:
    mem.add(ALICE, "chat", [MemoryItem(i, "alice", "chat", t) for i, t in ITEMS.items()])
    mem.embed_pending(ALICE, "chat")


def first(mem: LongTermMemory, query: str, mode: str) -> str | None:
    hits = mem.search(ALICE, "chat", query, k=3, mode=mode)  # type: ignore[arg-type]
    return hits[0].item.id if hits else None


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "vector"])
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("头发干燥怎么办？", "hair"),  # Simplified question, Traditional memory
        ("在哪裡續辦？", "passport"),  # Traditional question, Simplified memory
        ("笔记電腦", "laptop"),  # both scripts, each where the memory has the other
    ],
)
def test_one_script_finds_the_other(stores: Stores, mode: str, query: str, expected: str) -> None:
    mem = memory(stores, HashEmbedder())
    add(mem)
    assert first(mem, query, mode) == expected


def test_stored_text_stays_as_written(stores: Stores) -> None:
    mem = memory(stores, HashEmbedder())
    add(mem)
    hits = mem.search(ALICE, "chat", "头发", k=1)
    assert hits[0].item.text == ITEMS["hair"]
    assert {i.id: i.text for i in mem.get(ALICE, "chat", list(ITEMS))} == ITEMS


def test_the_fold_changes_traditional_only() -> None:
    assert fold("頭髮 臺灣 乾燥 後來") == "头发 台湾 干燥 后来"
    assert fold("乾隆") == "乾隆"  # a phrase keeps its character
    for text in (
        "Melanie painted a sunrise, café №5 — naïve ß",
        "头发 台湾 后来 简体中文",  # already Simplified
        "ひらがな カタカナ 한국어 Русский ελληνικά",
        "「引号」“quotes”，。！？",  # punctuation, even beside Han
        "",
    ):
        assert fold(text) == text
    assert index_text("Melanie's 頭髮") == "Melanie's  头发 "
    assert query_terms("頭髮乾燥") == query_terms("头发干燥") == ["头发", "发干", "干燥"]


def test_opencc_loads_only_when_chinese_is_met() -> None:
    code = (
        "import sys\n"
        "from relaystate.store.terms import index_text, query_terms\n"
        "from relaystate.memory.embed import HashEmbedder\n"
        "index_text('a sunrise over the lake'); query_terms('What did Melanie paint?')\n"
        "HashEmbedder().embed(['paint'], kind='query')\n"
        "before = 'opencc' in sys.modules\n"
        "index_text('頭髮')\n"
        "print(before, 'opencc' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "True"]


def test_a_store_indexed_before_the_fold_finds_traditional_after_reindex(
    sql_store_url: str,
) -> None:
    old = open_store(sql_store_url)
    try:
        with unfolded():  # what relaystate 0.1 wrote: Traditional bigrams as they were
            add(memory(old))
    finally:
        old.close()
    upgraded = open_store(sql_store_url)
    try:
        mem = memory(upgraded)
        assert first(mem, "头发干燥", "keyword") is None  # old rows hold unfolded words
        cmd = [sys.executable, "-m", "relaystate.cli", "memory", "reindex"]
        run = subprocess.run(
            [*cmd, "--store", sql_store_url, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert json.loads(run.stdout) == {"reindexed": 2}  # hair, laptop: Traditional
        assert first(mem, "头发干燥", "keyword") == "hair"
        assert first(mem, "筆記", "keyword") == "laptop"
        assert first(mem, "Melanie sunrise", "keyword") == "english"
        assert first(mem, "护照到期", "keyword") == "passport"
        again = subprocess.run([*cmd, "--store", sql_store_url], capture_output=True, text=True)
        assert "up to date" in again.stdout
    finally:
        upgraded.close()
