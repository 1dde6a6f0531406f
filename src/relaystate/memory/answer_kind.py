"""The category a question asks for, and the conversation's words that belong to it.

"Which cities has Jon visited?" and "What martial arts has John done?" ask for members of a
category, spread over a conversation in turns that rarely repeat the question's words ("We
loved Rome!", "taekwondo class tonight"). The category is looked up in WordNet
(:mod:`.lexicon`) and the conversation's words filed under it (Rome, taekwondo) become one
more keyword list of recall. Measured on LoCoMo dev, multi-hop recall_all@10: 0.275 ->
0.289 (keyword + e5), 0.254 -> 0.261 (keyword + hash vectors), 0.261 -> 0.268 (keyword
only), recall_any@10 and MRR within 0.003. Tried with it and left out: favouring turns that
name something for every list question ("What ... has/did ..."): +0.035 with e5 but -0.036
with the hash embedder and -0.03 MRR, a signal that depends on what else is fused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from .lexicon import NOUN_ENDINGS, Lexicon

ASKED_KIND = re.compile(
    r"^\s*(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?"
    r"([^\W\d_]+(?:[ -][^\W\d_]+)?)",
    re.I,
)
"""The noun after "what"/"which" ("what kind of" left out), with the word after it: the
phrase may be the category ("martial arts"), else its last word is ("European countries":
"countries"), once a verb after it is dropped ("cities have": "cities")."""
_VERBS_AND_LINKS = """
is are was were do does did has have had can could would will should might must shall the a
an of for to in on at by with
"""
_NOT_A_KIND = frozenset(_VERBS_AND_LINKS.split())
_WORD = re.compile(r"[^\W\d_]{3,}")


def word_forms(texts: Iterable[str]) -> dict[str, frozenset[str]]:
    """The conversation's words by the lemma each may be a form of ("cities" under "city"
    and "cities"): WordNet's plural endings, so category members are found as written."""
    forms: dict[str, set[str]] = {}
    for word in {w.casefold() for text in texts for w in _WORD.findall(text)}:
        forms.setdefault(word, set()).add(word)
        for end, put in NOUN_ENDINGS:
            if word.endswith(end) and len(word) > len(end) + 1:
                forms.setdefault(word[: len(word) - len(end)] + put, set()).add(word)
    return {lemma: frozenset(words) for lemma, words in forms.items()}


def kinds_asked(question: str) -> list[str]:
    """Candidate category nouns of a "what/which X" question, the phrase first:
    "What martial arts has John done?" -> ["martial arts", "arts"]."""
    found = ASKED_KIND.match(question)
    if found is None:
        return []
    words = [w for w in re.split(r"[ -]", found.group(1).casefold()) if w not in _NOT_A_KIND]
    if not words:
        return []
    return [" ".join(words), words[-1]] if len(words) == 2 else words


def members_mentioned(
    question: str,
    forms: Callable[[], dict[str, frozenset[str]]],
    lexicon: Lexicon | None,
    speakers: Sequence[str] = (),
) -> list[str]:
    """The conversation's words (``forms()``, asked only when a category is found) that
    WordNet files under the category a question asks for (sorted; empty when it asks for
    none, or WordNet is absent)."""
    if lexicon is None:
        return []
    for kind in kinds_asked(question):
        lemma = lexicon.lemma(kind)
        members = lexicon.members(lemma) if lemma is not None else None
        if not members:
            continue
        words = forms()
        found: set[str] = set()
        for member in members:
            parts = member.split()
            if len(parts) == 1:
                found |= words.get(member, frozenset())
            elif all(p in words for p in parts):
                found.add(member)
        found -= {s.casefold() for s in speakers}
        if found:
            return sorted(found)
    return []
