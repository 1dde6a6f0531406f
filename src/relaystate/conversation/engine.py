"""One conversational turn: route -> extract -> decide -> (runtime) commit, act, reply.

Routing is by rules first (an explicit task id, a pending pick from a list, cancel / pause /
continue words, the task waiting for an answer, a template's trigger words) and a model
only where rules cannot decide. The engine reads and writes nothing itself: it asks the
runtime for the turn (``begin_turn``: the session and its open tasks in one read), decides
one edit, and commits it with a function that phrases the reply from the state the runtime
leaves; task change, user message, session and reply are one transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..edits import Cancel, Confirm, Edit, Fill, Resume, Start
from ..errors import InvalidSlot, TaskLocked, TemplateError
from ..llm import Model, RouteCandidate, RuleModel, SlotSpec
from ..model import Action, TaskState, TaskStatus
from ..next_step import AskConfirmation, AskSlot
from ..runtime import Runtime
from ..scope import Scope, checked
from ..templates import TaskTemplate
from ..turns import PendingTurn, ReplyContext, TurnResult
from ..views import turn_view
from . import replies
from .clock import today
from .extract import extract
from .intents import control_word, detect_language, is_no, is_yes


@dataclass
class Turn:
    """What one turn did: the reply, the task it touched and the actions that moved."""

    session_id: str
    reply: str
    language: str
    state: TaskState | None = None
    actions: list[Action] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return turn_view(
            session_id=self.session_id,
            reply=self.reply,
            language=self.language,
            state=self.state,
            actions=self.actions,
        )


class Conversation:
    """Talks to one person at a time over a Runtime; all decisions are deterministic."""

    def __init__(self, runtime: Runtime, model: Model | None = None) -> None:
        self.runtime = runtime
        self.model = model or RuleModel()

    def handle(
        self,
        scope: Scope,
        text: str,
        session_id: str | None = None,
        *,
        language: str | None = None,
        task_id: str | None = None,
    ) -> Turn:
        """One turn of the scope's user: read, decide, commit; the Turn says what happened."""
        scope = checked(scope)
        text = text.strip()
        if not text:
            raise ValueError("there is nothing to say: the text is empty")
        pending = self.runtime.begin_turn(scope, session_id, text)
        lang = language or _language(text, pending.stored_language)
        pending.session.language = lang
        result = _Turn(self, pending, lang).route(task_id)
        return Turn(result.session.id, result.reply, lang, result.state, result.actions)


_SHORT_ENGLISH = {"yes", "no", "ok", "okay", "yeah", "yep", "nope", "sure", "hi", "hello"}
_SHORT_ENGLISH |= {"continue", "cancel", "stop", "thanks", "correct", "wrong", "help"}


def _language(text: str, previous: str | None) -> str:
    """The language of the reply: what the user writes, unless the text does not tell
    ("Mate 60", "ORD-10001", "$120" keep the session's language)."""
    detected = detect_language(text, default=previous or "en")
    if detected == "zh" or previous is None:
        return detected
    words = re.findall(r"[A-Za-z]{2,}", text)
    if len(words) >= 2 or (words and words[0].lower() in _SHORT_ENGLISH):
        return detected
    return previous


class _Turn:
    """The working state of one turn (kept off Conversation so that it stays stateless)."""

    def __init__(self, conv: Conversation, pending: PendingTurn, lang: str) -> None:
        self.conv, self.p = conv, pending
        self.text, self.lang = pending.text, lang
        self.today = today(pending.session.timezone)

    # -- routing ---------------------------------------------------------------------------
    def route(self, task_id: str | None) -> TurnResult:
        if task_id is not None:
            return self._continue(self.p.task(task_id))
        picked = self._picked()
        if picked is not None:
            return self._welcome(picked)
        control = control_word(self.text)
        here = self.p.open_here
        if control == "cancel" and here:
            return self._cancel(here[0])
        if control == "pause" and here:
            title = self.p.template_of(here[0]).title(self.lang)
            return self._say(replies.words(self.lang)["paused"].format(title=title))
        if control == "continue":
            return self._welcome(here[0]) if here else self._choose()
        triggered = self._triggered()
        waiting = next((s for s in here if s.task.status == TaskStatus.WAITING_USER), None)
        if waiting is not None and (triggered is None or triggered.type == waiting.task.type):
            return self._continue(waiting)
        if triggered is not None:
            return self._start(triggered)
        routed = self._ask_model()
        if routed is not None:
            return self._start(routed)
        titles = replies.words(self.lang)["sep"].join(t.title(self.lang) for t in self.p.templates)
        return self._say(replies.words(self.lang)["help"].format(titles=titles))

    def _triggered(self) -> TaskTemplate | None:
        lowered = self.text.lower()
        best: tuple[int, TaskTemplate] | None = None
        for template in self.p.templates:
            for words in template.triggers.values():
                for word in words:
                    if word.lower() in lowered and (best is None or len(word) > best[0]):
                        best = (len(word), template)
        return None if best is None else best[1]

    def _ask_model(self) -> TaskTemplate | None:
        candidates = [RouteCandidate(t.type, t.goal or t.title("en")) for t in self.p.templates]
        choice = self.conv.model.route(self.text, candidates, language=self.lang)
        return None if choice is None else self.conv.runtime.templates.get(choice.id)

    def _picked(self) -> TaskState | None:
        choices = self.p.session.context.get("choices")
        number = re.fullmatch(r"\s*(\d{1,2})\s*[.)）]?\s*", self.text)
        if not choices or number is None:
            return None
        index = int(number.group(1)) - 1
        if not 0 <= index < len(choices):
            return None
        self.p.session.context.pop("choices", None)
        return self.p.task(choices[index])

    # -- deciding ----------------------------------------------------------------------------
    def _commit(self, edit: Edit | None, phrase: Any) -> TurnResult:
        return self.p.commit(
            edit, lambda ctx: self.conv.model.rephrase(phrase(ctx), language=self.lang)
        )

    def _say(self, text: str) -> TurnResult:
        return self._commit(None, lambda ctx: text)

    def _reply(self, ctx: ReplyContext, error: str | None = None, prefix: str = "") -> str:
        """The reply from the state the turn left: its next question, or what happened."""
        words = replies.words(self.lang)
        if isinstance(ctx.error, TaskLocked):
            return words["cannot"].format(reason=str(ctx.error))
        if isinstance(ctx.error, InvalidSlot):
            error = ctx.error.reason
        assert ctx.state is not None and ctx.step is not None
        reply = replies.reply_for(self.p.template_of(ctx.state), ctx.state, ctx.step, self.lang)
        if error:
            reply = words["invalid"].format(reason=error) + reply
        return prefix + reply

    def _start(self, template: TaskTemplate) -> TurnResult:
        found = extract(template, self.text, language=self.lang, today=self.today)
        opening = template.opening_slot
        if opening is not None and opening not in found.values:
            found.values[opening] = template.slot(opening).validate(self.text)
        edit = Start(template.type, found.values, session_id=self.p.session.id)
        first_error = next(iter(found.errors.values()), None)
        return self._commit(edit, lambda ctx: self._reply(ctx, first_error))

    def _continue(self, state: TaskState) -> TurnResult:
        task_id = state.task.id
        if not state.task.status.is_open:
            return self._commit(Resume(task_id), self._reply)
        template = self.p.template_of(state)
        step = self.p.next_step(state)
        expecting = step.slot if isinstance(step, AskSlot) else None
        found = extract(
            template, self.text, language=self.lang, today=self.today, expecting=expecting
        )
        if not (found.values or is_yes(self.text) or is_no(self.text)):
            found.values.update(self._model_values(template))  # rules found nothing
            for name in found.values:
                found.errors.pop(name, None)
        edit: Edit = Resume(task_id)
        prefix = ""
        if found.values:
            edit = Fill(task_id, found.values)
        elif isinstance(step, AskConfirmation) and is_yes(self.text):
            edit = Confirm(task_id, True)
        elif isinstance(step, AskConfirmation) and is_no(self.text):
            edit = Confirm(task_id, False)
            prefix = replies.words(self.lang)["change_what"]
        error = next(iter(found.errors.values()), None)
        return self._commit(edit, lambda ctx: self._reply(ctx, error, prefix))

    def _model_values(self, template: TaskTemplate) -> dict[str, Any]:
        """Ask the model (if one is configured) for slot values; keep only valid ones."""
        specs = [SlotSpec.from_slot(slot, language=self.lang) for slot in template.slots]
        found = self.conv.model.extract(self.text, specs, language=self.lang, today=self.today)
        values: dict[str, Any] = {}
        for name, value in (found or {}).items():
            if value is None:
                continue
            try:
                values[name] = template.slot(name).validate(value)
            except (InvalidSlot, TemplateError):
                continue  # a bad answer is dropped: the user is asked instead
        return values

    def _cancel(self, state: TaskState) -> TurnResult:
        return self._commit(Cancel(state.task.id), self._reply)

    def _welcome(self, state: TaskState) -> TurnResult:
        def phrase(ctx: ReplyContext) -> str:
            assert ctx.state is not None and ctx.step is not None
            template = self.p.template_of(ctx.state)
            return replies.welcome(template, ctx.state, ctx.step, self.lang)

        return self._commit(Resume(state.task.id), phrase)

    def _choose(self) -> TurnResult:
        found = self.p.open_tasks(limit=9)
        words = replies.words(self.lang)
        if not found:
            titles = words["sep"].join(t.title(self.lang) for t in self.p.templates)
            return self._say(words["none_open"].format(titles=titles))
        if len(found) == 1:
            return self._welcome(found[0])
        self.p.session.context["choices"] = [s.task.id for s in found]
        items = [(self.p.template_of(s), s, self.p.next_step(s)) for s in found]
        return self._say(replies.choose(items, self.lang))
