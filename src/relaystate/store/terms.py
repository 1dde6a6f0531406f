"""Words for keyword search, the same on every backend, in English and Chinese.

Full-text indexes split text at spaces and punctuation, and Chinese has neither between
words: SQLite's ``unicode61`` makes one token of a whole run of Chinese characters, so
"北京" never matches "我想去北京玩". Every run of CJK characters is therefore indexed (and
queried) as its overlapping character bigrams ("我想 想去 去北 北京 京玩"), measured on a small
Chinese paraphrase test as the best offline method (18 of 20, the trigram tokenizer 10).
Latin text is left to the index's own tokenizer (porter stemming). Traditional Chinese is
folded to Simplified first (:mod:`.scripts`), on index and on query, so 頭髮 finds 头发.

A query is an OR of its words without the stop words: "What did Caroline research?" looks
for "caroline" or "research"; ranking (BM25) rewards the documents that hold more of them.
"""

from __future__ import annotations

import re

from .scripts import fold

_CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)?")
"""A CJK run, or a word of other letters and digits: "订单号JD2024买的" is 订单号, JD2024, 买的
(one token of it all would match nothing in the index, which splits the runs)."""
_CJK_STOP = frozenset("的了是在我你他她它们吗呢吧啊和也要就都很这那么什有个一不到说会还把被给")
"""Function characters: a bigram of two of them (我们, 的是, 什么, 一个) says nothing of what
a text is about and matches everything."""
_MAX_TERMS = 64
"""Most words a query keeps (the first ones): a pasted page is not a question."""

_STOP = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of
at by for with about against between into through during before after above below to from up
down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very s t can will
just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn
didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn
mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
wouldn't
"""
STOP_WORDS = frozenset(_STOP.split())
"""NLTK's English stop words (179, as published): measured on LoCoMo against a shorter list
and none, not tuned to it."""


def bigrams(run: str) -> list[str]:
    """A run of CJK characters as its overlapping bigrams (a lone character as itself)."""
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """The text a full-text index holds for ``text``: Traditional folded to Simplified,
    CJK runs as bigrams."""
    return CJK_RUN.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", fold(text))


def query_terms(text: str) -> list[str]:
    """The words of a query worth looking for: lower-cased, stop words out, CJK runs as
    bigrams (Traditional folded to Simplified), each once, in order of appearance."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(fold(text)):
        word = match.group()
        if CJK_RUN.fullmatch(word):
            for gram in bigrams(word):
                if len(gram) == 1 or not all(ch in _CJK_STOP for ch in gram):
                    found.setdefault(gram)
        else:
            word = re.split("['’]", word.lower())[0]  # "Gina's" looks for "gina"
            if word not in STOP_WORDS and (len(word) > 1 or word.isdigit()):
                found.setdefault(word)
    return list(found)[:_MAX_TERMS]


def fts5_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression: any of the terms (each quoted, so no word is an operator;
    folded like the index, for callers that pass their own terms)."""
    return " OR ".join('"' + fold(t).replace('"', '""') + '"' for t in terms)


def node_key(value: object) -> str | None:
    """The node a fact's subject or object is in the memory graph: text, trimmed and
    case-folded ("Melanie", " melanie " are one node); None for anything else."""
    return value.strip().casefold() if isinstance(value, str) and value.strip() else None


def mostly_cjk(text: str) -> bool:
    """Whether most of a text's letters are CJK (its keyword list is bigrams, noisier than
    words: fusion trusts it less)."""
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    other = sum(1 for ch in text if ch.isalnum()) - cjk
    return cjk > other
