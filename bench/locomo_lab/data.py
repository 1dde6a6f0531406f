"""LoCoMo loading, evidence normalisation and metrics (evaluation only; data is read from
../shared/data and never copied)."""
import json
import math
import os
import re
from dataclasses import dataclass, field

DATA = os.environ.get("LOCOMO_PATH", "/work/shared/data/locomo-dev.json")
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Turn:
    conv: str
    dia_id: str
    session: int
    idx: int          # position within the session (0-based)
    pos: int          # position within the conversation (0-based)
    speaker: str
    text: str
    caption: str
    date: str         # session date string as stored


@dataclass
class Conv:
    cid: str
    speakers: list
    turns: list
    sessions: dict = field(default_factory=dict)   # session -> list[Turn]
    dates: dict = field(default_factory=dict)      # session -> date string


@dataclass
class Question:
    conv: str
    qid: int
    text: str
    category: int
    evidence: list


def norm_ev(e):
    m = re.fullmatch(r"D:?(\d+):0*(\d+)", e.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def load(path=DATA):
    raw = json.load(open(path))
    convs, qs, stats = [], [], {"skipped_no_evidence": 0, "dropped_ids": [], "fixed_ids": []}
    for s in raw:
        c = s["conversation"]
        cv = Conv(s["sample_id"], [c["speaker_a"], c["speaker_b"]], [])
        n = 1
        while f"session_{n}_date_time" in c:
            if isinstance(c.get(f"session_{n}"), list):
                cv.dates[n] = c[f"session_{n}_date_time"]
                cv.sessions[n] = []
                for i, t in enumerate(c[f"session_{n}"]):
                    tu = Turn(cv.cid, t["dia_id"], n, i, len(cv.turns), t["speaker"], t["text"],
                              t.get("blip_caption", "") or "", cv.dates[n])
                    cv.turns.append(tu)
                    cv.sessions[n].append(tu)
            n += 1
        ids = {t.dia_id for t in cv.turns}
        convs.append(cv)
        for qi, q in enumerate(s["qa"]):
            if q["category"] == 5:
                continue
            ev = []
            for e in q.get("evidence", []):
                ne = norm_ev(e)
                if ne and ne in ids:
                    if ne != e:
                        stats["fixed_ids"].append((cv.cid, e, ne))
                    ev.append(ne)
                else:
                    stats["dropped_ids"].append((cv.cid, e))
            ev = list(dict.fromkeys(ev))
            if not ev:
                stats["skipped_no_evidence"] += 1
                continue
            qs.append(Question(cv.cid, qi, q["question"], q["category"], ev))
    return convs, qs, stats


KS = (1, 5, 10, 20)


def score(ranked, evidence):
    ev = set(evidence)
    r = {}
    for k in KS:
        top = set(ranked[:k])
        r[f"any@{k}"] = float(bool(ev & top))
        r[f"all@{k}"] = float(ev <= top)
    rr = 0.0
    for i, d in enumerate(ranked):
        if d in ev:
            rr = 1.0 / (i + 1)
            break
    r["mrr"] = rr
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in ev)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(ev), 10)))
    r["ndcg@10"] = dcg / idcg
    return r
