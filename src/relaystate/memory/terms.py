"""Words for keyword search, the same on every backend, in English and Chinese.

Full-text indexes split text at spaces and punctuation, and Chinese has neither between
words: SQLite's ``unicode61`` makes one token of a whole run of Chinese characters, so
"北京" never matches "我想去北京玩". Every run of CJK characters is therefore indexed (and
queried) as its overlapping character bigrams ("我想 想去 去北 北京 京玩"), measured on a small
Chinese paraphrase test as the best offline method (18 of 20, the trigram tokenizer 10).
Latin text is left to the index's own tokenizer (porter stemming).

A query is an OR of its words without the stop words: "What did Caroline research?" looks
for "caroline" or "research"; ranking (BM25) rewards the documents that hold more of them.
"""

from __future__ import annotations

import re

_CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_]+|[{_CJK}]+")
_MAX_TERMS = 64
"""Most words a query keeps (the first ones): a pasted page is not a question."""

_STOP = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just let me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
s t d ll m re ve don doesn didn isn wasn aren weren won shall may might must also get got
like ok okay yes yeah oh hey hi really well
"""
STOP_WORDS = frozenset(_STOP.split())


def bigrams(run: str) -> list[str]:
    """A run of CJK characters as its overlapping bigrams (a lone character as itself)."""
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """The text a full-text index holds for ``text``: CJK runs become bigrams."""
    return _CJK_RUN.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", text)


def query_terms(text: str) -> list[str]:
    """The words of a query worth looking for: lower-cased, stop words out, CJK runs as
    bigrams, each once, in order of appearance."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group()
        if _CJK_RUN.fullmatch(word):
            for gram in bigrams(word):
                found.setdefault(gram)
        else:
            word = word.lower()
            if word not in STOP_WORDS and (len(word) > 1 or word.isdigit()):
                found.setdefault(word)
    return list(found)[:_MAX_TERMS]


def fts5_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression: any of the terms (each quoted, so no word is an operator)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
