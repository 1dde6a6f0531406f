"""Category words through WordNet's hyponyms (issue 11, step 5): a type lexicon, no model.

    .venv/bin/python bench/locomo_lab/wn_lab.py [--methods a,b] [--loco]

Needs Debian's wordnet-base (/usr/share/wordnet). A question's noun ("cities", "martial
arts", "pets", "instruments") names a category; the conversation's words that WordNet files
under it (Rome, kickboxing? dog, violin) become one more keyword list, fused by RRF.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decomp  # noqa: E402
import lab  # noqa: E402
from data import load  # noqa: E402
from lab import headline, query_terms, ranks, rrf, score, summarise  # noqa: E402

WN = os.environ.get("WORDNET_DIR", "/usr/share/wordnet")


class WordNet:
    """Nouns only: lemma -> synsets, synset -> lemmas, hyponym and instance-hyponym links."""

    def __init__(self, root=WN):
        self.index = defaultdict(list)  # lemma -> [offset] in sense order
        with open(os.path.join(root, "index.noun"), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                p = line.split()
                n_syn, n_ptr = int(p[2]), int(p[3])
                self.index[p[0]] = [int(o) for o in p[4 + n_ptr + 2:4 + n_ptr + 2 + n_syn]]
        self.lemmas = {}
        self.hypo = defaultdict(list)
        self.hyper = defaultdict(list)
        with open(os.path.join(root, "data.noun"), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                p = line.split(" | ")[0].split()
                off = int(p[0])
                wc = int(p[3], 16)
                self.lemmas[off] = [p[4 + 2 * i].lower() for i in range(wc)]
                i = 4 + 2 * wc
                pc = int(p[i])
                for j in range(pc):
                    sym, tgt, pos = p[i + 1 + 4 * j], int(p[i + 2 + 4 * j]), p[i + 3 + 4 * j]
                    if pos != "n":
                        continue
                    if sym in ("~", "~i"):
                        self.hypo[off].append(tgt)
                    elif sym in ("@", "@i"):
                        self.hyper[off].append(tgt)
        self.exc = {}
        with open(os.path.join(root, "noun.exc"), encoding="latin-1") as f:
            for line in f:
                a, b = line.split()[:2]
                self.exc[a] = b

    RULES = (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
             ("men", "man"), ("ies", "y"), ("s", ""))

    def morphy(self, w):
        w = w.lower()
        if w in self.index:
            return w
        if w in self.exc:
            return self.exc[w]
        for a, b in self.RULES:
            if w.endswith(a) and w[: len(w) - len(a)] + b in self.index:
                return w[: len(w) - len(a)] + b
        return None

    def closure(self, lemma, senses=3, depth=6):
        """Lemmas under the first `senses` senses of `lemma`, down to `depth` links."""
        out = set()
        seen = set()
        front = list(self.index.get(lemma, [])[:senses])
        for _ in range(depth):
            nxt = []
            for s in front:
                if s in seen:
                    continue
                seen.add(s)
                out.update(self.lemmas[s])
                nxt += self.hypo.get(s, [])
            front = nxt
        out.discard(lemma)
        return out


_W = None


def wn():
    global _W
    if _W is None:
        _W = WordNet()
    return _W


_VOC = {}


def vocab_lemmas(ix):
    """lemma -> surface words of the conversation (turn text and captions)."""
    if ix.conv.cid not in _VOC:
        w = wn()
        m = defaultdict(set)
        for t in ix.turns:
            for x in query_terms(t.text + " " + t.caption):
                if x.isalpha() and len(x) >= 3:
                    lem = w.morphy(x)
                    if lem:
                        m[lem].add(x)
        _VOC[ix.conv.cid] = m
    return _VOC[ix.conv.cid]


HEAD = re.compile(r"^\s*(?:what|which)\s+(?:(?:kind|kinds|type|types|sort|sorts)\s+of\s+)?"
                  r"([a-z]+(?:[ -][a-z]+)?)", re.I)
QWORDS = {"is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can",
          "could", "would", "will", "should", "might", "made", "makes", "make"}


def categories(q, mode):
    """Category nouns of q. mode 'head': the answer-type noun after what/which (and its
    two-word form: 'musical instruments' -> musical_instrument, instrument); 'all': every
    content word and adjacent pair."""
    if mode == "all":
        ws = re.findall(r"[a-z]+", q.lower())
        return list(query_terms(q)) + [f"{a}_{b}" for a, b in zip(ws, ws[1:])]
    m = HEAD.match(q)
    if not m:
        return []
    ws = re.split(r"[ -]", m.group(1).lower())
    ws = [w for w in ws if w not in QWORDS]
    if not ws:
        return []
    out = []
    if len(ws) == 2:
        out.append("_".join(ws))  # the phrase first
        ws = ws[1:] if ws[0] not in lab.STOP else ws[:1]
    out.append(ws[0] if len(ws) == 1 else ws[-1])
    return out


def lemma_of(w, c):
    if "_" in c:
        return c if c in w.index else w.morphy(c)
    return w.morphy(c)


def expand(ix, q, m):
    w = wn()
    voc = vocab_lemmas(ix)
    out = []
    for c in categories(q, m.get("mode", "head")):
        lem = lemma_of(w, c)
        if not lem:
            continue
        cl = w.closure(lem, m.get("senses", 3), m.get("depth", 6))
        if len(cl) > m.get("max", 2000):
            continue
        out += [s for l in sorted(cl) if l in voc for s in sorted(voc[l]) if s not in out]
        if "_" in c and out:
            break  # the phrase found members: its head word would add noise
    return out


def run(ix, q, qvec, m):
    keys = ("wn", "wn_w", "senses", "depth", "max", "mode", "wn_mult", "prf", "prf_k", "prf_b",
            "prf_kw")
    base = decomp.run_layers(ix, q, qvec, {**{k: v for k, v in m.items() if k not in keys},
                                           "return_scores": True})
    ex = expand(ix, q, m) if m.get("wn") else []
    if ex:
        named, _ = decomp.analyse(ix, q)
        if m.get("wn_mult"):
            hit = ix.fts("t", ex) > 0
            base = base * np.where(hit, 1.0 + m["wn_mult"], 1.0)
        else:
            add = rrf(ranks(ix.fts("t", ex)), m["wn_w"])
            if len(named) == 1:
                add = add * np.where(ix.spk == named[0], 1.0 + decomp.REC["spk"], 1.0)
            base = base + add
    if m.get("prf"):
        top = np.argsort(-base, kind="stable")[: m.get("prf_k", 3)]
        q2 = qvec + m.get("prf_b", 0.5) * ix.V[top].mean(axis=0)
        q2 = q2 / np.linalg.norm(q2)
        add = rrf(ranks(ix.V @ q2, np.ones(ix.n, bool)), m["prf"])
        if m.get("prf_kw"):
            named, _ = decomp.analyse(ix, q)
            if len(named) == 1:
                add = add * np.where(ix.spk == named[0], 1.0 + decomp.REC["spk"], 1.0)
        base = base + add
    order = np.argsort(-base, kind="stable")
    return [ix.turns[int(i)].dia_id for i in order]


B = dict(decomp.B)
DM = {"best": B}
for s_ in (1, 3):
    for w_ in (0.5, 1.0, 2.0):
        DM[f"head_s{s_}_w{w_}"] = {**B, "wn": 1, "wn_w": w_, "senses": s_}
    for x in (0.25, 0.5):
        DM[f"head_s{s_}_mult{x}"] = {**B, "wn": 1, "wn_mult": x, "senses": s_}
for w_ in (0.25, 0.5):
    DM[f"all_s1_w{w_}"] = {**B, "wn": 1, "wn_w": w_, "senses": 1, "mode": "all"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default=",".join(DM))
    ap.add_argument("--show", type=int, default=0)
    a = ap.parse_args()
    convs, qs, _ = load()
    ixs = {c.cid: lab.Index(c, True, True, speaker_in_body=1) for c in convs}
    from embcache import embed
    Q = embed([q.text for q in qs], "query")
    qv = {q.text: v for q, v in zip(qs, Q)}
    if a.show:
        for q in [q for q in qs if q.category == 1][: a.show]:
            print(q.text, "->", categories(q.text, "head"), expand(ixs[q.conv], q.text, {"max": 2000})[:20])
        return
    for name in a.methods.split(","):
        rows = [(q, score(run(ixs[q.conv], q.text, qv[q.text], DM[name]), q.evidence))
                for q in qs]
        s = summarise(rows)
        pc = " ".join(f"{v[1]:.2f}" for v in s["per_conv"].values())
        print(f"{name:26s} {headline(s)}  mh/conv {pc}", flush=True)


REC0 = {"np": 0.0}
DM.update({
    "rec": REC0,
    "rec_np": {"np": 0.5, "np_list": 1},
    "rec_wn": {"np": 0.0, "wn": 1, "wn_w": 1.0, "senses": 1},
    "rec_np_wn": {"np": 0.5, "np_list": 1, "wn": 1, "wn_w": 1.0, "senses": 1},
    "rec_np_wn_mult": {"np": 0.5, "np_list": 1, "wn": 1, "wn_mult": 0.25, "senses": 1},
    "rec_np_wn_e5w": {"np": 0.5, "np_list": 1, "wn": 1, "wn_w": 1.0, "senses": 1, "e5w": 1.0},
})

WN1 = {"wn": 1, "wn_w": 1.0, "senses": 1}
DM.update({
    "rec_wn_e5w": {"np": 0.0, **WN1, "e5w": 1.0},
    "rec_wn_exp10": {"np": 0.0, **WN1, "exp": 10, "exp_w": 0.5},
    "rec_wn_exp10_e5w": {"np": 0.0, **WN1, "exp": 10, "exp_w": 0.5, "e5w": 1.0},
})

for k_ in (3, 5, 10):
    for b_ in (0.5, 1.0, 2.0):
        for w_ in (1.0, 2.0):
            DM[f"wn_prf{w_}_k{k_}_b{b_}"] = {"np": 0.0, **WN1, "prf": w_, "prf_k": k_, "prf_b": b_,
                                            "prf_kw": 1}


if __name__ == "__main__":
    main()
