"""LoCoMo retrieval lab (issue 11): offline, deterministic, no language model.

    .venv/bin/python bench/locomo_lab/lab.py [--methods fts,fts_e5,...] [--loco] [--no-e5]

Every method returns a ranked list of TURN ids (dia_ids) of the question's conversation.
Scores recall_any@k / recall_all@k (k = 1, 5, 10, 20), MRR, NDCG@10 against the evidence,
per category and per conversation, and query latency. Category 5 (adversarial) is left out.
The data is read from /work/shared/data (LOCOMO_PATH), never copied.
"""
import argparse
import os
import re
import sqlite3
import statistics
import sys
import time
from collections import Counter, defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import CATS, KS, load, score  # noqa: E402

# NLTK's English stop-word list (179 words), as published; not tuned to LoCoMo.
STOP = set("""i me my myself we our ours ourselves you you're you've you'll you'd your yours
yourself yourselves he him his himself she she's her hers herself it it's its itself they them
their theirs themselves what which who whom this that that'll these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while
of at by for with about against between into through during before after above below to from
up down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very s t can will
just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't
doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't
needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
wouldn't""".split())

WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
TIME_Q = re.compile(r"^\s*(when|how long|what (year|month|date|day|time))\b|\bwhen\b", re.I)
TIME_T = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|recently|lately|earlier|this "
    r"(week|month|year|weekend|morning|evening)|weekend|week|month|year|since|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"\d{4})\b", re.I)
RRF_K = 60
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
_MON = "|".join(MONTHS)
DATE_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MON}),?\s+(\d{{4}})\b", re.I)
DATE_MDY = re.compile(rf"\b({_MON})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
DATE_MY = re.compile(rf"\b({_MON}),?\s+(\d{{4}})\b", re.I)
DATE_M = re.compile(rf"\b({_MON})\b", re.I)
DATE_Y = re.compile(r"\b((?:19|20)\d\d)\b")


def parse_session_date(s):
    """'1:56 pm on 8 May, 2023' -> datetime.date"""
    import datetime
    m = DATE_DMY.search(s)
    return datetime.date(int(m.group(3)), MONTHS.index(m.group(2).lower()) + 1, int(m.group(1)))


def question_dates(q):
    """A date constraint named in the question -> (predicate on a date, words to drop)."""
    import datetime
    m = DATE_DMY.search(q) or DATE_MDY.search(q)
    if m:
        g = m.groups()
        if g[0].isdigit():
            d, mo, y = int(g[0]), g[1], int(g[2])
        else:
            mo, d, y = g[0], int(g[1]), int(g[2])
        try:
            day = datetime.date(y, MONTHS.index(mo.lower()) + 1, d)
        except ValueError:
            return None, set()
        return ((lambda x: 0 <= (x - day).days <= 1), {mo.lower(), str(y), str(d)})
    m = DATE_MY.search(q)
    if m:
        mi, y = MONTHS.index(m.group(1).lower()) + 1, int(m.group(2))
        return ((lambda x: (x.year, x.month) == (y, mi) or
                 (x.year * 12 + x.month == y * 12 + mi + 1 and x.day <= 14)),
                {m.group(1).lower(), str(y)})
    m = DATE_M.search(q)
    if m and not re.search(r"\bmay\s+(i|you|we|he|she|they|it|be)\b", q, re.I):
        mi = MONTHS.index(m.group(1).lower()) + 1
        return ((lambda x: x.month == mi or (x.month == mi % 12 + 1 and x.day <= 14)),
                {m.group(1).lower()})
    m = DATE_Y.search(q)
    if m:
        y = int(m.group(1))
        return (lambda x: x.year == y or (x.year == y + 1 and x.month == 1 and x.day <= 14)), \
            {m.group(1)}
    return None, set()


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def query_terms(text, drop=()):
    out = []
    for w in words(text):
        w = w.split("'")[0]
        if len(w) < 2 or w in STOP or w in drop:
            continue
        if w not in out:
            out.append(w)
    return out


def fts_or(terms):
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def turn_text(t, captions=True):
    s = f"{t.speaker}: {t.text}"
    if captions and t.caption:
        s += f" [image: {t.caption}]"
    return s


def window_text(conv, t):
    """A turn with its previous and next turn of the same session, speakers named (for e5)."""
    ss = conv.sessions[t.session]
    return " ".join(turn_text(x, False) for x in ss[max(0, t.idx - 1):t.idx + 2])


class Index:
    """One conversation's memory: FTS5 tables in an in-memory SQLite DB + e5 vectors."""

    def __init__(self, conv, use_e5=True, captions=True, tokenizer="porter unicode61",
                 speaker_in_body=False):
        self.conv = conv
        self.turns = conv.turns
        self.speakers = [s.lower() for s in conv.speakers]
        self.db = sqlite3.connect(":memory:")
        tok = tokenizer
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{tok}')")
        self.db.execute(f"CREATE VIRTUAL TABLE s USING fts5(body, tokenize='{tok}')")
        self.db.execute(f"CREATE VIRTUAL TABLE w USING fts5(body, tokenize='{tok}')")
        texts = [turn_text(t, captions) for t in self.turns]
        # turn bodies without the speaker prefix for the keyword index (the speaker is metadata)
        bodies = [(f"{t.speaker}: " if speaker_in_body else "") + t.text
                  + (f" [image: {t.caption}]" if captions and t.caption else "")
                  for t in self.turns]
        self.db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)",
                            [(i, b) for i, b in enumerate(bodies)])
        self.sess_ids = sorted(conv.sessions)
        self.sess_of = np.array([self.sess_ids.index(t.session) for t in self.turns])
        self.db.executemany("INSERT INTO s(rowid, body) VALUES (?, ?)", [
            (j, " ".join(bodies[t.pos] for t in conv.sessions[s]))
            for j, s in enumerate(self.sess_ids)])
        # window documents: a turn with its previous and next turn (same session)
        win = []
        for t in self.turns:
            ss = conv.sessions[t.session]
            parts = [bodies[x.pos] for x in ss[max(0, t.idx - 1):t.idx + 2]]
            win.append((t.pos, " ".join(parts)))
        self.db.executemany("INSERT INTO w(rowid, body) VALUES (?, ?)", win)
        self.bodies = bodies
        self.sdate = [parse_session_date(conv.dates[s]) for s in self.sess_ids]
        self.is_time = np.array([bool(TIME_T.search(t.text)) for t in self.turns])
        self.spk = np.array([t.speaker.lower() for t in self.turns])
        self.V = None
        if use_e5:
            from embcache import embed
            self.V = embed([turn_text(t, False) for t in self.turns], "passage")
            # context vectors: a turn's vector plus half of its same-session neighbours'
            W = self.V.copy()
            for t in self.turns:
                for nb in (t.idx - 1, t.idx + 1):
                    if 0 <= nb < len(conv.sessions[t.session]):
                        W[t.pos] += 0.5 * self.V[conv.sessions[t.session][nb].pos]
            self.W = W / np.linalg.norm(W, axis=1, keepdims=True)
            C = np.stack([self.V[self.sess_of == j].mean(0) for j in range(len(self.sess_ids))])
            self.C = C / np.linalg.norm(C, axis=1, keepdims=True)
        self.n = len(self.turns)

    def fts(self, table, terms):
        """-> np.array of scores (higher better, 0 = no match) for each row."""
        n = self.n if table != "s" else len(self.sess_ids)
        out = np.zeros(n)
        if not terms:
            return out
        for rid, sc in self.db.execute(
                f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ?",
                (fts_or(terms),)):
            out[rid] = sc
        return out


def ranks(scores, valid=None):
    """1-based ranks by descending score; rows with score <= 0 (no match) get rank inf."""
    order = np.argsort(-scores, kind="stable")
    r = np.empty(len(scores))
    r[order] = np.arange(1, len(scores) + 1)
    if valid is None:
        valid = scores > 0
    r[~valid] = np.inf
    return r


def rrf(r, w):
    return w / (RRF_K + r)


def retrieve(ix, q, qvec, cfg, return_scores=False):
    """Ranked turn ids for question text q under config cfg (a dict); with return_scores,
    the fused score of every turn (before diversification) instead."""
    qwords = {w.split("'")[0] for w in words(q)}
    named = [s for s in ix.speakers if s in qwords]
    drop = set(named) if cfg.get("spk", 0) else set()
    datep = None
    if cfg.get("date", 0):
        datep, dwords = question_dates(q)
        if datep:
            drop |= dwords
    terms = query_terms(q, drop)
    total = np.zeros(ix.n)
    kw = ix.fts("t", terms)
    total += rrf(ranks(kw), cfg.get("kw", 2.0))
    if cfg.get("win", 0):
        total += rrf(ranks(ix.fts("w", terms)), cfg["win"])
    esim = None
    if ix.V is not None and cfg.get("e5", 0):
        esim = ix.V @ qvec
        total += rrf(ranks(esim, np.ones(ix.n, bool)), cfg["e5"])
    ss = None
    if ix.V is not None and cfg.get("e5win", 0):
        total += rrf(ranks(ix.W @ qvec, np.ones(ix.n, bool)), cfg["e5win"])
    if cfg.get("sess", 0) or cfg.get("sess_e5", 0):
        ss = np.zeros(len(ix.sess_ids))
        if cfg.get("sess", 0):
            ss += rrf(ranks(ix.fts("s", terms)), cfg["sess"])
        if cfg.get("sess_e5", 0) and ix.V is not None:
            ss += rrf(ranks(ix.C @ qvec, np.ones(len(ss), bool)), cfg["sess_e5"])
        if cfg.get("sess_inherit", 1.0):
            total += cfg.get("sess_inherit", 1.0) * ss[ix.sess_of]
    if cfg.get("prf", 0):
        top = np.argsort(-total, kind="stable")[:cfg.get("prf_docs", 5)]
        tf = Counter()
        for i in top:
            for w in set(query_terms(ix.bodies[i], drop)):
                tf[w] += 1
        exp = [w for w, c in sorted(tf.items(), key=lambda x: (-x[1], x[0]))
               if c >= 2 and w not in terms][:cfg.get("prf_terms", 10)]
        if exp:
            total += rrf(ranks(ix.fts("t", terms + exp)), cfg["prf"])
    if cfg.get("spk", 0) and len(named) == 1:
        total *= np.where(ix.spk == named[0], 1.0 + cfg["spk"], 1.0)
    if datep:
        ok = np.array([datep(ix.sdate[j]) for j in range(len(ix.sess_ids))])
        total *= np.where(ok[ix.sess_of], 1.0 + cfg["date"], 1.0)
    if cfg.get("time", 0) and TIME_Q.search(q):
        total *= np.where(ix.is_time, 1.0 + cfg["time"], 1.0)
    if cfg.get("sbest", 0) and ss is not None:
        # the best turn of each session, ranked by its session's score: one link per session
        best = {}
        for i in np.argsort(-total, kind="stable"):
            best.setdefault(int(ix.sess_of[i]), int(i))
        srank = np.argsort(-ss, kind="stable")
        extra = np.zeros(ix.n)
        for r, j in enumerate(srank[:cfg.get("sbest_n", 10)]):
            extra[best[int(j)]] = rrf(r + 1, cfg["sbest"])
        total = total + extra
    if return_scores:
        return total
    order = np.argsort(-total, kind="stable")
    div = cfg.get("div", 0)
    if div:
        # session diversification in rank space: a turn's key is its rank plus div times the
        # number of turns of its session already placed above it (greedy over the top 60)
        head, placed, cnt = list(order[:60]), [], Counter()
        rank = {int(i): r for r, i in enumerate(head)}
        while head:
            best = min(head, key=lambda i: (rank[int(i)] + div * cnt[ix.sess_of[i]], rank[int(i)]))
            head.remove(best)
            placed.append(best)
            cnt[ix.sess_of[best]] += 1
        order = placed + list(order[60:])
    return [ix.turns[i].dia_id for i in order]


BASE = {"kw": 2.0, "e5": 1.0}
METHODS = {
    "fts": {"kw": 1.0, "_e5": False},
    "fts_e5": dict(BASE),
    "fts_e5_spk": {**BASE, "spk": 0.5},
    "fts_e5_time": {**BASE, "time": 0.3},
    "fts_e5_sess": {**BASE, "sess": 1.0, "sess_e5": 1.0},
    "fts_e5_win": {**BASE, "win": 1.0},
    "fts_e5_prf": {**BASE, "prf": 1.0},
    "fts_e5_div": {**BASE, "div": 2.0},
    "combo": {**BASE, "spk": 0.5, "win": 1.0, "sess": 1.0, "sess_e5": 1.0, "time": 0.3},
    "combo_sbest": {**BASE, "spk": 0.5, "win": 1.0, "sess": 1.0, "sess_e5": 1.0, "time": 0.3,
                    "sbest": 1.0},
    "combo_sbest2": {**BASE, "spk": 0.5, "win": 1.0, "sess": 1.0, "sess_e5": 1.0, "time": 0.3,
                     "sbest": 2.0},
    "combo_sbest_noinh": {**BASE, "spk": 0.5, "win": 1.0, "sess": 1.0, "sess_e5": 1.0,
                          "time": 0.3, "sbest": 2.0, "sess_inherit": 0.0},
    "combo_date": {**BASE, "spk": 0.5, "win": 1.0, "sess": 1.0, "sess_e5": 1.0, "time": 0.3,
                   "date": 0.5},
    "rec": {"kw": 2.0, "e5": 1.0, "win": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0,
            "sess_e5": 1.0, "time": 0.3},
    "recommended": {"kw": 2.0, "e5": 1.0, "e5win": 1.0, "win": 1.0, "spk": 0.25, "date": 1.0,
                    "sess": 1.0, "sess_e5": 1.0, "time": 0.3},
    "recommended_no_e5": {"kw": 2.0, "win": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0,
                          "time": 0.3},
    "rec+e5win": {"kw": 2.0, "e5": 1.0, "win": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0,
                  "sess_e5": 1.0, "time": 0.3, "e5win": 1.0},
    "rec+e5win.5": {"kw": 2.0, "e5": 1.0, "win": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0,
                    "sess_e5": 1.0, "time": 0.3, "e5win": 0.5},
    "rec-win": {"kw": 2.0, "e5": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0,
                "sess_e5": 1.0, "time": 0.3},
    "rec-sess": {"kw": 2.0, "e5": 1.0, "win": 1.0, "spk": 0.25, "date": 1.0, "time": 0.3},
    "rec-spk": {"kw": 2.0, "e5": 1.0, "win": 1.0, "date": 1.0, "sess": 1.0,
                "sess_e5": 1.0, "time": 0.3},
    "rec-date": {"kw": 2.0, "e5": 1.0, "win": 1.0, "spk": 0.25, "sess": 1.0,
                 "sess_e5": 1.0, "time": 0.3},
    "rec-e5": {"kw": 2.0, "win": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0, "time": 0.3},
    "rec+div": {"kw": 2.0, "e5": 1.0, "win": 1.0, "spk": 0.25, "date": 1.0, "sess": 1.0,
                "sess_e5": 1.0, "time": 0.3, "div": 2.0},
    "combo_nosess": {**BASE, "spk": 0.5, "win": 1.0, "time": 0.3},
    "combo_prf": {**BASE, "spk": 0.5, "win": 1.0, "sess": 1.0, "sess_e5": 1.0, "time": 0.3,
                  "prf": 1.0},
}


def evaluate(convs, qs, cfg, ixs, qv):
    rows, lat = [], []
    for q in qs:
        ix = ixs[q.conv]
        t0 = time.perf_counter()
        ranked = retrieve(ix, q.text, qv.get(q.text), cfg)
        lat.append(time.perf_counter() - t0)
        rows.append((q, score(ranked, q.evidence)))
    return rows, lat


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def summarise(rows):
    keys = [f"any@{k}" for k in KS] + ["all@10", "mrr", "ndcg@10"]
    out = {"all": {k: mean([r[k] for _, r in rows]) for k in keys}}
    for c in CATS:
        sub = [r for q, r in rows if q.category == c]
        out[CATS[c]] = {k: mean([r[k] for r in sub]) for k in keys}
        out[CATS[c]]["n"] = len(sub)
    out["all"]["n"] = len(rows)
    per = defaultdict(list)
    for q, r in rows:
        per[q.conv].append((q, r))
    out["per_conv"] = {c: (mean([r["any@10"] for _, r in v]),
                           mean([r["all@10"] for q, r in v if q.category == 1]))
                       for c, v in sorted(per.items())}
    return out


def fmt_table(name, s, lat):
    keys = [f"any@{k}" for k in KS] + ["all@10", "mrr", "ndcg@10"]
    lines = [f"### {name}", "", "| slice | n | " + " | ".join(keys) + " |",
             "|---|---|" + "---|" * len(keys)]
    for sl in ["all"] + list(CATS.values()):
        lines.append(f"| {sl} | {s[sl]['n']} | " + " | ".join(f"{s[sl][k]:.3f}" for k in keys)
                     + " |")
    pc = s["per_conv"]
    a = [v[0] for v in pc.values()]
    m = [v[1] for v in pc.values()]
    lines.append("")
    lines.append("per conversation any@10 / multi-hop all@10: " + ", ".join(
        f"{c} {v[0]:.3f}/{v[1]:.3f}" for c, v in pc.items()))
    lines.append(f"spread any@10 min {min(a):.3f} max {max(a):.3f} sd {statistics.pstdev(a):.3f};"
                 f" mh all@10 min {min(m):.3f} max {max(m):.3f} sd {statistics.pstdev(m):.3f}")
    ls = sorted(lat)
    lines.append(f"latency (retrieval, query vector given) p50 {1000 * ls[len(ls) // 2]:.1f} ms"
                 f" p95 {1000 * ls[int(len(ls) * .95)]:.1f} ms")
    return "\n".join(lines)


def headline(s):
    return (f"any@10 {s['all']['any@10']:.3f}  mh all@10 {s['multi-hop']['all@10']:.3f}  "
            f"all@10 {s['all']['all@10']:.3f}  mrr {s['all']['mrr']:.3f}  "
            f"ndcg {s['all']['ndcg@10']:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--no-e5", action="store_true")
    ap.add_argument("--no-captions", action="store_true")
    ap.add_argument("--brief", action="store_true")
    ap.add_argument("--speaker-in-body", type=int, default=1)
    ap.add_argument("--loco", action="store_true", help="leave-one-conversation-out grid")
    a = ap.parse_args()
    if not os.path.exists(os.environ.get("LOCOMO_PATH", "/work/shared/data/locomo-dev.json")):
        print("LoCoMo data missing: skipped")
        return
    convs, qs, st = load()
    print(f"{len(qs)} questions (cat 5 left out; {st['skipped_no_evidence']} without evidence "
          f"skipped; ids dropped {st['dropped_ids']}; fixed {st['fixed_ids']})")
    use_e5 = not a.no_e5
    ixs = {c.cid: Index(c, use_e5, not a.no_captions, speaker_in_body=a.speaker_in_body)
           for c in convs}
    qv = {}
    if use_e5:
        from embcache import embed
        Q = embed([q.text for q in qs], "query")
        qv = {q.text: v for q, v in zip(qs, Q)}
    if a.loco:
        return loco(convs, qs, ixs, qv)
    for name in a.methods.split(","):
        cfg = METHODS[name]
        rows, lat = evaluate(convs, qs, cfg, ixs, qv)
        s = summarise(rows)
        if a.brief:
            print(f"{name:28s} {headline(s)}")
        else:
            print(fmt_table(name, s, lat) + "\n")


def loco(convs, qs, ixs, qv):
    from grid import GRID
    res = {}
    for name, cfg in GRID.items():
        rows, _ = evaluate(convs, qs, cfg, ixs, qv)
        res[name] = rows
        print(f"{name:40s} {headline(summarise(rows))}", flush=True)
    cids = [c.cid for c in convs]
    held = []
    for c in cids:
        def obj(rows):
            tr = [r for q, r in rows if q.conv != c]
            mh = [r for q, r in rows if q.conv != c and q.category == 1]
            return mean([r["any@10"] for r in tr]) + mean([r["all@10"] for r in mh])
        best = max(res, key=lambda n: obj(res[n]))
        print(f"held out {c}: chosen on the other four = {best}")
        held += [(q, r) for q, r in res[best] if q.conv == c]
    print("LOCO held-out: " + headline(summarise(held)))


if __name__ == "__main__":
    main()
