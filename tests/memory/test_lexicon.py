"""WordNet as recall's type lexicon: the reader (on a small dictionary written here in
WordNet's own file format, and on Debian's real one) and the category words a question asks
for."""

from __future__ import annotations

from pathlib import Path

import pytest

from relaystate.memory.answer_kind import kinds_asked, members_mentioned, word_forms
from relaystate.memory.lexicon import Lexicon

# synset: (words, [(pointer, target synset)]); offsets are the lines' byte positions
SYNSETS = {
    "entity": (["entity"], [("~", "city")]),
    "city": (["city", "metropolis"], [("~", "capital"), ("@", "entity")]),
    "capital": (["national_capital"], [("~i", "rome"), ("~i", "paris"), ("@", "city")]),
    "rome": (["Rome", "Roma"], [("@i", "capital")]),
    "paris": (["Paris"], [("@i", "capital")]),
}


def write_wordnet(root: Path) -> Path:
    """index.noun, data.noun and noun.exc in WordNet 3.0's format."""
    root.mkdir()
    header = "  1 A licence line, as WordNet's files start with\n"
    names = list(SYNSETS)
    offsets: dict[str, int] = {}
    at = len(header)
    for name in names:  # every line's length is fixed once offsets are 8 digits wide
        offsets[name] = at
        at += len(_data_line(name, dict.fromkeys(names, 0)).encode())
    (root / "data.noun").write_text(
        header + "".join(_data_line(n, offsets) for n in names), encoding="latin-1"
    )
    lemmas = sorted((word.lower(), name) for name, (words, _) in SYNSETS.items() for word in words)
    index = "".join(f"{lemma} n 1 1 @ 1 0 {offsets[name]:08d}  \n" for lemma, name in lemmas)
    (root / "index.noun").write_text(header + index, encoding="latin-1")
    (root / "noun.exc").write_text("metropoles metropolis\n", encoding="latin-1")
    return root


def _data_line(name: str, offsets: dict[str, int]) -> str:
    words, links = SYNSETS[name]
    said = " ".join(f"{w} 0" for w in words)
    pointers = " ".join(f"{p} {offsets[t]:08d} n 0000" for p, t in links)
    return (
        f"{offsets[name]:08d} 15 n {len(words):02x} {said} {len(links):03d} {pointers}"
        f" | a gloss for {name}  \n"
    )


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lexicon:
    monkeypatch.setenv("RELAYSTATE_WORDNET", str(write_wordnet(tmp_path / "wn")))
    found = Lexicon.find()
    assert found is not None
    return found


def test_members_are_found_through_hyponyms_and_instances(tiny: Lexicon) -> None:
    assert tiny.lemma("cities") == "city"  # WordNet's plural rules
    assert tiny.lemma("Metropoles") == "metropolis"  # its exception list
    assert tiny.lemma("national capitals") == "national_capital"  # a phrase
    assert tiny.lemma("villages") is None
    assert tiny.members("city") == frozenset(
        {"metropolis", "national capital", "rome", "roma", "paris"}
    )
    assert tiny.members("national_capital", depth=1) == frozenset()  # its own words only
    assert tiny.members("entity", limit=3) is None  # too broad to name a category
    assert tiny.members("paris") == frozenset()
    assert tiny.members("nowhere") == frozenset()


def test_an_absent_or_switched_off_wordnet_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYSTATE_WORDNET", str(tmp_path / "none-here"))
    assert Lexicon.find() is None
    assert (
        members_mentioned("Which cities has Jon visited?", lambda: word_forms(["Rome"]), None) == []
    )


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("Which cities has Jon visited?", ["cities"]),
        ("What martial arts has John done?", ["martial arts", "arts"]),
        ("What European countries has Maria been to?", ["european countries", "countries"]),
        ("What kind of art does Caroline make?", ["art"]),
        ("What types of pottery have Melanie and her kids made?", ["pottery"]),
        ("What did Caroline research?", ["caroline"]),
        ("When did Melanie paint a sunrise?", []),
        ("How many children does Melanie have?", []),
    ],
)
def test_the_kind_a_question_asks_for(question: str, kinds: list[str]) -> None:
    assert kinds_asked(question) == kinds


def test_members_are_the_conversation_words_under_the_category(tiny: Lexicon) -> None:
    forms = word_forms(["Jon: We loved Rome!", "Gina: Paris was rainy", "Jon: two cities, nice"])
    assert forms["city"] == frozenset({"cities"}) and forms["rome"] == frozenset({"rome"})
    asked: list[str] = []

    def words() -> dict[str, frozenset[str]]:
        asked.append("forms")
        return forms

    found = members_mentioned("Which cities has Jon visited?", words, tiny, ["jon", "gina"])
    assert found == ["paris", "rome"]
    assert members_mentioned("Which books has Jon read?", words, tiny) == []
    assert asked == ["forms"]  # the conversation's words only for a category WordNet knows
    # a speaker named like a member is who speaks, not a place the question is after
    assert members_mentioned("Which cities has Paris seen?", words, tiny, ["paris"]) == ["rome"]


def test_debians_wordnet_knows_the_categories_people_ask_about(wordnet: Lexicon) -> None:
    def under(category: str) -> frozenset[str]:
        lemma = wordnet.lemma(category)
        assert lemma is not None, category
        members = wordnet.members(lemma)
        assert members is not None, category
        return members

    assert {"rome", "paris", "chicago"} <= under("cities")
    assert {"spain", "england"} <= under("European countries")
    assert {"karate", "judo"} <= under("martial arts")
    assert {"violin", "clarinet"} <= under("musical instruments")
    assert wordnet.lemma("children") == "child"
    assert wordnet.members("entity") is None  # everything is an entity
    assert wordnet.members("activity") is None
    assert wordnet.members("city") is wordnet.members("city")  # remembered
