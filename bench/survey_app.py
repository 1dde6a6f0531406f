"""The Task under test of ``bench/conversation.py``: a survey whose every turn fills one
free-text slot while the task keeps waiting, so that every turn is the same slot-filling turn.

A module of its own that imports nothing but relaystate, so that ``relaystate say --app
survey_app:templates`` loads it as cheaply as an application's templates would load.
"""

from __future__ import annotations

from relaystate import Slot, Stage, TaskTemplate
from relaystate.task.next_step import AskSlot
from relaystate.task.templates import Condition

START = "start the survey please"
"""What the user says to start the survey (its trigger word)."""
ANSWER_BYTES = 500
QUESTION = "And what else?"

_BODY = (
    "The checkout was quick and the courier arrived on time, although the box was dented "
    "and one of the glasses inside had a small chip near the rim. "
)


def survey() -> TaskTemplate:
    """One free-text slot, asked again and again: its stage's exit is never met."""
    return TaskTemplate(
        "survey",
        goal="Keep answering",
        slots=[Slot("answer", ask={"en": QUESTION})],
        stages=[
            Stage(
                "collecting",
                exit=Condition("never", lambda t: False, lambda t: AskSlot("answer")),
            ),
            Stage("done"),
        ],
        triggers={"en": ["survey"]},
    )


def templates() -> list[TaskTemplate]:
    """For ``relaystate --app survey_app:templates``."""
    return [survey()]


def answer(i: int) -> str:
    """The user's ``i``-th answer: ``ANSWER_BYTES`` of ASCII, different every turn."""
    return (f"Visit {i}: " + _BODY * 5)[: ANSWER_BYTES - 3] + " ok"
