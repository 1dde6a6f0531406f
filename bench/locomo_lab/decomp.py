"""Model-free query decomposition on top of the lab's recommended method (issue 11, step 4).

    .venv/bin/python bench/locomo_lab/decomp.py [--methods a,b] [--loco]

A question is split into sub-queries (per named speaker, per content term, per conjunct; for
"list" questions per session of the named speaker), each sub-query is ranked, and the
rankings are fused with the main ranking by a quota (each sub-query's best turns are placed in
the top k) or by RRF.
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab  # noqa: E402
from data import load  # noqa: E402
from lab import (METHODS, headline, mean, query_terms, ranks, retrieve, rrf,  # noqa: E402
                 summarise, words, question_dates, score)

REC = METHODS["recommended"]
LIST_Q = re.compile(r"^\s*(what|which|where|who)\b.*\b(has|have|did|does|do)\b", re.I)
BOTH_Q = re.compile(r"\b(both|share|in common|together)\b", re.I)


def analyse(ix, q):
    qwords = {w.split("'")[0] for w in words(q)}
    named = [s for s in ix.speakers if s in qwords]
    drop = set(ix.speakers)
    _, dwords = question_dates(q)
    drop |= dwords
    terms = query_terms(q, drop)
    return named, terms


def term_rank(ix, terms, qvec, mask=None, e5=1.0):
    """Keyword (turn FTS, weight 2) + e5 (weight e5) for a sub-query; rows outside mask get
    nothing."""
    s = rrf(ranks(ix.fts("t", terms)), 2.0) + rrf(ranks(ix.fts("w", terms)), 1.0)
    if e5 and qvec is not None:
        s = s + rrf(ranks(ix.V @ qvec, np.ones(ix.n, bool)), e5)
    if mask is not None:
        s = np.where(mask, s, -1.0)
    return np.argsort(-s, kind="stable"), s


def quota_fuse(main, subs, per_sub, k=10):
    """Top k = the main ranking's best turns, then each sub-ranking's best per_sub turns not
    already placed (round-robin over sub-queries); the rest in main order."""
    quota, seen = [], set()
    for _ in range(per_sub):
        for sub in subs:
            nxt = next((int(i) for i in sub if int(i) not in seen), None)
            if nxt is not None and len(quota) < k:
                quota.append(nxt)
                seen.add(nxt)
    mi = [int(i) for i in main]
    head = [i for i in mi if i not in seen][: max(0, k - len(quota))]
    placed = seen | set(head)
    return head + quota + [i for i in mi if i not in placed]


def rr_fuse(lists, k=10):
    """Round-robin over the lists (first list first), de-duplicated."""
    out, seen = [], set()
    its = [iter(int(i) for i in x) for x in lists]
    while its and len(out) < len(lists[0]):
        for it in list(its):
            for i in it:
                if i not in seen:
                    out.append(i)
                    seen.add(i)
                    break
            else:
                its.remove(it)
    return out


def run_decomp(ix, q, qvec, m):
    base = retrieve(ix, q, qvec, REC, return_scores=True)
    main = np.argsort(-base, kind="stable")
    named, terms = analyse(ix, q)
    subs = []
    if m.get("per_speaker") and len(named) >= 2:
        for s in named:
            mask = ix.spk == s
            subs.append(np.argsort(-np.where(mask, base, -1.0), kind="stable"))
    if m.get("per_term") and len(terms) >= 2:
        mask = (ix.spk == named[0]) if (len(named) == 1 and m.get("term_spk")) else None
        for t in terms:
            r, _ = term_rank(ix, [t], None if m.get("term_no_e5") else qvec, mask,
                             e5=m.get("term_e5", 0.0))
            subs.append(r)
    if m.get("list") and len(named) == 1 and LIST_Q.search(q) and terms:
        # per session: the named speaker's best turn matching a predicate word
        kw = ix.fts("t", terms)
        mask = (ix.spk == named[0]) & (kw > 0)
        sc = np.where(mask, base, -1.0)
        best = {}
        for i in np.argsort(-sc, kind="stable"):
            if sc[i] <= 0:
                break
            best.setdefault(int(ix.sess_of[i]), int(i))
        subs.append(np.array(sorted(best.values(), key=lambda i: -base[i])))
    if not subs:
        return [ix.turns[i].dia_id for i in main]
    if m.get("fuse") == "rr":
        order = rr_fuse([main] + subs)
    elif m.get("fuse") == "rrf":
        tot = np.zeros(ix.n)
        r = np.empty(ix.n)
        r[main] = np.arange(1, ix.n + 1)
        tot += rrf(r, 1.0)
        for sub in subs:
            rs = np.full(ix.n, np.inf)
            rs[np.asarray(sub, int)] = np.arange(1, len(sub) + 1)
            tot += rrf(rs, m.get("sub_w", 1.0) / len(subs))
        order = np.argsort(-tot, kind="stable")
    else:
        order = quota_fuse(main, subs, m.get("quota", 1))
    return [ix.turns[int(i)].dia_id for i in order]


DM = {
    "rec": {},
    "spk_quota1": {"per_speaker": 1, "quota": 1},
    "spk_quota2": {"per_speaker": 1, "quota": 2},
    "spk_rr": {"per_speaker": 1, "fuse": "rr"},
    "term_quota1": {"per_term": 1, "quota": 1},
    "term_quota1_e5": {"per_term": 1, "quota": 1, "term_e5": 1.0},
    "term_quota1_spk": {"per_term": 1, "quota": 1, "term_spk": 1},
    "term_rrf": {"per_term": 1, "fuse": "rrf"},
    "term_rr": {"per_term": 1, "fuse": "rr"},
    "list_quota1": {"list": 1, "quota": 1},
    "list_quota2": {"list": 1, "quota": 2},
    "list_quota3": {"list": 1, "quota": 3},
    "list_rrf": {"list": 1, "fuse": "rrf"},
    "list_rr": {"list": 1, "fuse": "rr"},
    "spk+list_quota2": {"per_speaker": 1, "list": 1, "quota": 2},
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default=",".join(DM))
    ap.add_argument("--loco", action="store_true")
    a = ap.parse_args()
    convs, qs, _ = load()
    ixs = {c.cid: lab.Index(c, True, True, speaker_in_body=1) for c in convs}
    from embcache import embed
    Q = embed([q.text for q in qs], "query")
    qv = {q.text: v for q, v in zip(qs, Q)}
    if a.loco:
        return loco(ixs, qs, qv)
    for name in a.methods.split(","):
        rows = [(q, score(run(ixs[q.conv], q.text, qv[q.text], DM[name]), q.evidence))
                for q in qs]
        s = summarise(rows)
        pc = " ".join(f"{v[1]:.2f}" for v in s["per_conv"].values())
        print(f"{name:22s} {headline(s)}  any@1 {s['all']['any@1']:.3f}  mh/conv {pc}",
              flush=True)



# --- vocabulary expansion through e5 word vectors (model-free: the embedder only) -----------
_VOC = {}


def vocab(ix):
    """The conversation's content words (turn text and captions) and their e5 vectors."""
    if ix.conv.cid not in _VOC:
        from embcache import embed
        v = sorted({w for t in ix.turns for w in query_terms(t.text + " " + t.caption)
                    if w.isalpha() and len(w) >= 3})
        _VOC[ix.conv.cid] = (v, embed(v, "query"))
    return _VOC[ix.conv.cid]


def expand(ix, terms, m):
    from embcache import embed
    if not terms:
        return []
    v, W = vocab(ix)
    T = embed(terms, "query")
    out = []
    for t, x in zip(terms, T):
        sims = W @ x
        for j in np.argsort(-sims)[:m + 1]:
            w = v[j]
            if w != t and w not in terms and w not in out:
                out.append(w)
    return out


EXP = {f"exp{m}_w{w}": {"exp": m, "exp_w": w} for m in (3, 5, 10) for w in (0.5, 1.0, 2.0)}
DM.update(EXP)


# --- answer-type layer: list questions whose answers are names (proper nouns) ---------------
CAP = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s[A-Z][a-z]+)*)\b|\"[^\"]+\"")
_NOT = set(lab.MONTHS) | {"i", "monday", "tuesday", "wednesday", "thursday", "friday",
                          "saturday", "sunday", "hey", "hi", "wow", "thanks", "yeah", "oh",
                          "yes", "sure", "congrats", "awesome", "great", "haha", "omg", "ok"}


def proper(ix):
    if not hasattr(ix, "_proper"):
        spk = set(ix.speakers)
        out = []
        for t in ix.turns:
            found = False
            for m in CAP.finditer(t.text):
                w = m.group(0).strip('"').lower()
                if m.group(0).startswith('"') or (w.split()[0] not in _NOT
                                                   and w.split()[0] not in spk
                                                   and w not in ("mel",)):
                    found = True
                    break
            out.append(found)
        ix._proper = np.array(out)
    return ix._proper


def winvec(ix):
    if not hasattr(ix, "VW"):
        from embcache import embed
        ix.VW = embed([lab.window_text(ix.conv, t) for t in ix.turns], "passage")
    return ix.VW


def run(ix, q, qvec, m):
    """Layered methods (any of np/exp/e5w/... keys) or a decomposition method."""
    if any(k in m for k in ("np", "exp", "e5w", "e5cap", "e5term", "e5nospk")):
        return run_layers(ix, q, qvec, m)
    return run_decomp(ix, q, qvec, m)


def run_layers(ix, q, qvec, m):
    base = retrieve(ix, q, qvec, {**REC, **m.get("cfg", {})}, return_scores=True)
    if m.get("e5cap"):
        if not hasattr(ix, "VC"):
            from embcache import embed
            ix.VC = embed([lab.turn_text(t, True) for t in ix.turns], "passage")
        base = base + rrf(ranks(ix.VC @ qvec, np.ones(ix.n, bool)), m["e5cap"])
    if m.get("e5w"):
        add = rrf(ranks(winvec(ix) @ qvec, np.ones(ix.n, bool)), m["e5w"])
        base = base + add
    named, terms = analyse(ix, q)
    if m.get("exp"):
        ex = expand(ix, terms, m["exp"])
        if ex:
            add = rrf(ranks(ix.fts("t", ex)), m.get("exp_w", 1.0))
            if m.get("exp_win"):
                add = add + rrf(ranks(ix.fts("w", ex)), m["exp_win"])
            if m.get("exp_sess"):
                add = add + rrf(ranks(ix.fts("s", ex)), m["exp_sess"])[ix.sess_of]
            if len(named) == 1:
                add = add * np.where(ix.spk == named[0], 1.0 + REC["spk"], 1.0)
            base = base + add
    trig = LIST_Q.search(q) if m.get("np_list") else re.match(r"\s*(what|which|who)\b", q, re.I)
    if trig and m.get("np"):
        base = base * np.where(proper(ix), 1.0 + m["np"], 1.0)
    if m.get("e5term") and terms:
        from embcache import embed
        T = embed(terms, "query")
        add = np.zeros(ix.n)
        for x in T:
            add += rrf(ranks(ix.V @ x, np.ones(ix.n, bool)), m["e5term"] / len(terms))
            if m.get("e5term_win"):
                add += rrf(ranks(winvec(ix) @ x, np.ones(ix.n, bool)), m["e5term"] / len(terms))
        base = base + add
    if m.get("e5nospk") and named:
        from embcache import embed
        q2 = re.sub(r"\b(" + "|".join(named) + r")('s)?\b", "", q, flags=re.I)
        x = embed([re.sub(r"\s+", " ", q2).strip()], "query")[0]
        base = base + rrf(ranks(ix.V @ x, np.ones(ix.n, bool)), m["e5nospk"])
    if m.get("spk_all") and len(named) == 1:
        base = base * np.where(ix.spk == named[0], 1.0 + m["spk_all"], 1.0)
    if m.get("spk_list") and len(named) == 1 and LIST_Q.search(q):
        base = base * np.where(ix.spk == named[0], 1.0 + m["spk_list"], 1.0)
    if m.get("return_scores"):
        return base
    order = np.argsort(-base, kind="stable")
    return [ix.turns[int(i)].dia_id for i in order]


for p in (0.1, 0.25, 0.5):
    DM[f"np{p}"] = {"np": p, "np_list": 1}
    DM[f"np{p}_wh"] = {"np": p}
    DM[f"np{p}_exp5"] = {"np": p, "np_list": 1, "exp": 5, "exp_w": 1.0}
for p in (0.5, 1.0):
    for e in (3, 5, 10):
        for w in (0.5, 1.0):
            DM[f"np{p}_exp{e}_w{w}"] = {"np": p, "np_list": 1, "exp": e, "exp_w": w}
for x in (0.25, 0.5, 1.0):
    DM[f"np0.5_exp5_w0.5_sl{x}"] = {"np": 0.5, "np_list": 1, "exp": 5, "exp_w": 0.5, "spk_list": x}
    DM[f"sl{x}"] = {"np": 0.0, "np_list": 1, "spk_list": x}
for w in (0.5, 1.0, 2.0):
    DM[f"e5w{w}"] = {"np": 0.0, "e5w": w}
    DM[f"e5w{w}_noctx"] = {"np": 0.0, "e5w": w, "cfg": {"e5win": 0.0}}
    DM[f"np0.5_exp5_w0.5_e5w{w}"] = {"np": 0.5, "np_list": 1, "exp": 5, "exp_w": 0.5, "e5w": w}


def loco_grid():
    g = {}
    for npw in (0.0, 0.25, 0.5):
        for ex, exw in ((0, 0), (5, 0.5), (5, 1.0), (10, 0.5)):
            for e5w in (0.0, 1.0, 2.0):
                m = {"np": npw, "np_list": 1, "e5w": e5w}
                if ex:
                    m.update(exp=ex, exp_w=exw)
                g[f"np{npw}_exp{ex}_w{exw}_e5w{e5w}"] = m
    return g


def loco(ixs, qs, qv):
    res = {}
    for name, m in loco_grid().items():
        rows = [(q, score(run(ixs[q.conv], q.text, qv[q.text], m), q.evidence)) for q in qs]
        res[name] = rows
        print(f"{name:28s} {headline(summarise(rows))}", flush=True)
    held = []
    for c in sorted(ixs):
        def obj(rows):
            return (mean([r["any@10"] for q, r in rows if q.conv != c])
                    + mean([r["all@10"] for q, r in rows if q.conv != c and q.category == 1]))
        best = max(res, key=lambda n: obj(res[n]))
        print(f"held out {c}: chosen on the other four = {best}")
        held += [(q, r) for q, r in res[best] if q.conv == c]
    print("LOCO held-out: " + headline(summarise(held)))
for x in (0.5, 1.0, 3.0, 100.0):
    DM[f"best_sa{x}"] = {"np": 0.5, "np_list": 1, "exp": 10, "exp_w": 0.5, "e5w": 1.0, "spk_all": x}
    DM[f"best_sl{x}"] = {"np": 0.5, "np_list": 1, "exp": 10, "exp_w": 0.5, "e5w": 1.0, "spk_list": x}
B = {"np": 0.5, "np_list": 1, "exp": 10, "exp_w": 0.5, "e5w": 1.0}
for x in (0.5, 1.0, 2.0):
    DM[f"best_e5t{x}"] = {**B, "e5term": x}
    DM[f"best_e5tw{x}"] = {**B, "e5term": x, "e5term_win": 1}
    DM[f"best_nospk{x}"] = {**B, "e5nospk": x}
for x in (0.5, 1.0, 2.0):
    DM[f"best_cap{x}"] = {**B, "e5cap": x}
    DM[f"cap{x}"] = {"np": 0.0, "e5cap": x}
for x in (0.25, 0.5):
    DM[f"best_expwin{x}"] = {**B, "exp_win": x}
    DM[f"best_expsess{x}"] = {**B, "exp_sess": x}


if __name__ == "__main__":
    main()
