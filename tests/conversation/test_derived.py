"""What a turn reads of its templates is built once per template, not on every turn; and a
template that is gone takes its derived data with it."""

from __future__ import annotations

import gc
import importlib
import weakref

from relaystate import Slot, Stage, TaskTemplate
from relaystate.conversation.derived import once_per_template
from relaystate.conversation.text import phrases

extract_module = importlib.import_module("relaystate.conversation.extract")


def template() -> TaskTemplate:
    return TaskTemplate(
        "cake_order",
        titles={"en": "cake order"},
        triggers={"en": ["a cake", "birthday cake"], "zh": ["蛋糕"]},
        slots=[Slot("flavour", choices=["chocolate", "lemon"], synonyms={"巧克力": "chocolate"})],
        stages=[Stage("collecting"), Stage("done")],
    )


def test_a_templates_words_and_choices_are_built_once() -> None:
    t = template()
    assert extract_module.template_words(t) is extract_module.template_words(t)
    assert extract_module.template_words(t)[0] == "birthday cake"  # longest first
    slot = t.slot("flavour")
    terms = extract_module._choice_terms(slot)
    assert terms is extract_module._choice_terms(slot)
    assert terms["巧克力"] == "chocolate"
    assert phrases(terms) is phrases(dict(terms))  # the same words: the same pattern


def test_what_is_derived_goes_with_its_template() -> None:
    built: list[str] = []

    @once_per_template
    def words(t: TaskTemplate) -> list[str]:
        built.append(t.type)
        return [t.type]

    t = template()
    assert words(t) == words(t) == ["cake_order"]
    assert built == ["cake_order"]
    gone = weakref.ref(t)
    del t
    gc.collect()
    assert gone() is None  # the cache held no strong reference to it
    words(template())
    assert built == ["cake_order", "cake_order"]  # a new template object is built anew
