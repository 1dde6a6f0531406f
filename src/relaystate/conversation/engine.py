"""One conversational turn: route -> extract -> advance -> act -> reply -> commit.

Routing is by rules first (an explicit task id, a pending pick from a list, cancel / pause /
continue words, the task waiting for an answer, a template's trigger words) and a model
only where rules cannot decide. The task change and the user's message commit together;
the reply, which may depend on actions that ran, is appended after (task before messages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidSlot, NotFound, TaskLocked, TemplateError
from ..llm import Model, RouteCandidate, RuleModel, SlotSpec
from ..model import Action, Message, Session, TaskState, TaskStatus
from ..next_step import AskConfirmation, AskSlot, NextStep
from ..runtime import Runtime
from ..templates import TaskTemplate
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
        task = None
        if self.state is not None:
            t = self.state.task
            task = {
                "id": t.id,
                "type": t.type,
                "stage": t.stage,
                "status": str(t.status),
                "slots": dict(t.slots),
                "missing_slots": list(t.missing_slots),
                "progress": t.progress.to_dict(),
                "status_text": t.status_text,
                "version": t.version,
            }
        return {
            "session_id": self.session_id,
            "reply": self.reply,
            "language": self.language,
            "task": task,
            "actions": [
                {
                    "id": a.id,
                    "name": a.name,
                    "status": str(a.status),
                    "idempotency_key": a.idempotency_key,
                    "attempts": a.attempts,
                }
                for a in self.actions
            ],
        }


class Conversation:
    """Talks to one person at a time over a Runtime; all decisions are deterministic."""

    def __init__(self, runtime: Runtime, model: Model | None = None) -> None:
        self.runtime = runtime
        self.model = model or RuleModel()

    def handle(
        self,
        user_id: str,
        text: str,
        session_id: str | None = None,
        *,
        language: str | None = None,
        task_id: str | None = None,
    ) -> Turn:
        text = text.strip()
        if not user_id:
            raise ValueError("a user id is required")
        if not text:
            raise ValueError("there is nothing to say: the text is empty")
        rt = self.runtime
        known = rt.store.get_session(session_id, user_id=user_id) if session_id else None
        lang = language or _language(text, known.language if known else None)
        session = rt.open_session(user_id, session_id, language=lang)
        turn = _Turn(self, session, user_id, text, lang)
        reply = turn.route(task_id)
        return turn.finish(self.model.rephrase(reply, language=lang))


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

    def __init__(
        self, conv: Conversation, session: Session, user_id: str, text: str, lang: str
    ) -> None:
        self.conv, self.rt = conv, conv.runtime
        self.session, self.user_id, self.text, self.lang = session, user_id, text, lang
        self.today = today(session.timezone)
        self.before: dict[str, dict[str, Any]] = {}
        self.state: TaskState | None = None
        self.said = False  # the user's message went in with a task change

    # -- routing ---------------------------------------------------------------------------
    def route(self, task_id: str | None) -> str:
        if task_id is not None:
            return self._continue(self._load(task_id))
        picked = self._picked()
        if picked is not None:
            return self._welcome(picked)
        control = control_word(self.text)
        here = self._open_here()
        if control == "cancel" and here:
            return self._cancel(here[0])
        if control == "pause" and here:
            title = self._template(here[0]).title(self.lang)
            return replies.words(self.lang)["paused"].format(title=title)
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
        titles = replies.words(self.lang)["sep"].join(
            t.title(self.lang) for t in self.rt.templates.values()
        )
        return replies.words(self.lang)["help"].format(titles=titles)

    def _open_here(self) -> list[TaskState]:
        """This session's open tasks, most recently changed first."""
        found = []
        for task_id in reversed(self.session.active_task_ids):
            try:
                state = self.rt.task(task_id, self.user_id)
            except NotFound:
                continue
            if state.task.status.is_open:
                found.append(state)
        return sorted(found, key=lambda s: s.task.updated_at, reverse=True)

    def _triggered(self) -> TaskTemplate | None:
        lowered = self.text.lower()
        best: tuple[int, TaskTemplate] | None = None
        for template in self.rt.templates.values():
            for words in template.triggers.values():
                for word in words:
                    if word.lower() in lowered and (best is None or len(word) > best[0]):
                        best = (len(word), template)
        return None if best is None else best[1]

    def _ask_model(self) -> TaskTemplate | None:
        candidates = [
            RouteCandidate(t.type, t.goal or t.title("en")) for t in self.rt.templates.values()
        ]
        choice = self.conv.model.route(self.text, candidates, language=self.lang)
        return None if choice is None else self.rt.templates.get(choice.id)

    def _picked(self) -> TaskState | None:
        choices = self.session.context.get("choices")
        number = re.fullmatch(r"\s*(\d{1,2})\s*[.)）]?\s*", self.text)
        if not choices or number is None:
            return None
        index = int(number.group(1)) - 1
        if not 0 <= index < len(choices):
            return None
        self.session.context.pop("choices", None)
        return self._load(choices[index])

    # -- acting ------------------------------------------------------------------------------
    def _load(self, task_id: str) -> TaskState:
        state = self.rt.task(task_id, self.user_id)
        self.before.setdefault(task_id, {str(a.seq): a.to_dict() for a in state.actions})
        return state

    def _template(self, state: TaskState) -> TaskTemplate:
        return self.rt.writer.template(state)

    def _step(self, state: TaskState) -> NextStep:
        return self.rt.resume(state.task.id, self.user_id, run=False).step

    def _said(self) -> list[tuple[str, str]]:
        self.said = True
        return [("user", self.text)]

    def _reply(self, state: TaskState, error: str | None = None) -> str:
        self.state = state
        step = self._step(state)
        reply = replies.reply_for(self._template(state), state, step, self.lang)
        if error:
            reply = replies.words(self.lang)["invalid"].format(reason=error) + reply
        return reply

    def _start(self, template: TaskTemplate) -> str:
        found = extract(template, self.text, language=self.lang, today=self.today)
        opening = template.opening_slot
        if opening is not None and opening not in found.values:
            found.values[opening] = template.slot(opening).validate(self.text)
        state = self.rt.start(
            self.user_id,
            template.type,
            session_id=self.session.id,
            slots=found.values,
            messages=self._said(),
        )
        self._remember(state)
        self.before.setdefault(state.task.id, {})
        first_error = next(iter(found.errors.values()), None)
        return self._reply(state, first_error)

    def _continue(self, state: TaskState) -> str:
        template = self._template(state)
        step = self._step(state)
        self._remember(state)
        task_id = state.task.id
        if not state.task.status.is_open:
            return self._reply(state)
        expecting = step.slot if isinstance(step, AskSlot) else None
        found = extract(
            template, self.text, language=self.lang, today=self.today, expecting=expecting
        )
        declined = False
        if not (found.values or is_yes(self.text) or is_no(self.text)):
            found.values.update(self._model_values(template))  # rules found nothing
            for name in found.values:
                found.errors.pop(name, None)
        try:
            if found.values:
                state = self.rt.fill(
                    task_id,
                    self.user_id,
                    found.values,
                    session_id=self.session.id,
                    messages=self._said(),
                )
            elif isinstance(step, AskConfirmation) and is_yes(self.text):
                state = self.rt.confirm(
                    task_id,
                    self.user_id,
                    True,
                    session_id=self.session.id,
                    messages=self._said(),
                )
            elif isinstance(step, AskConfirmation) and is_no(self.text):
                state = self.rt.confirm(
                    task_id,
                    self.user_id,
                    False,
                    session_id=self.session.id,
                    messages=self._said(),
                )
                declined = True
        except InvalidSlot as exc:
            return self._reply(state, exc.reason)
        except TaskLocked as exc:
            self.state = state
            return replies.words(self.lang)["cannot"].format(reason=str(exc))
        error = next(iter(found.errors.values()), None)
        reply = self._reply(state, error)
        return replies.words(self.lang)["change_what"] + reply if declined else reply

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

    def _cancel(self, state: TaskState) -> str:
        try:
            state = self.rt.cancel(
                state.task.id, self.user_id, session_id=self.session.id, messages=self._said()
            )
        except TaskLocked as exc:
            self.state = state
            return replies.words(self.lang)["cannot"].format(reason=str(exc))
        return self._reply(state)

    def _welcome(self, state: TaskState) -> str:
        state = self.rt.resume(state.task.id, self.user_id).state  # reconcile what is due
        self._remember(state)
        self.state = state
        return replies.welcome(self._template(state), state, self._step(state), self.lang)

    def _choose(self) -> str:
        found = self.rt.open_tasks(self.user_id)
        words = replies.words(self.lang)
        if not found:
            titles = words["sep"].join(t.title(self.lang) for t in self.rt.templates.values())
            return words["none_open"].format(titles=titles)
        if len(found) == 1:
            return self._welcome(self._load(found[0].id))
        states = [self._load(t.id) for t in found[:9]]
        self.session.context["choices"] = [s.task.id for s in states]
        items = [(self._template(s), s, self._step(s)) for s in states]
        return replies.choose(items, self.lang)

    def _remember(self, state: TaskState) -> None:
        ids = self.session.active_task_ids
        if state.task.id not in ids:
            self.session.active_task_ids = [*ids, state.task.id][-20:]

    # -- committing ------------------------------------------------------------------------
    def finish(self, reply: str) -> Turn:
        """Messages after the task they describe; the session's own state last."""
        state = self.state
        task_id = state.task.id if state is not None else None
        if state is not None:
            state = self.rt.task(state.task.id, self.user_id)
        now = self.rt.clock()
        said = (
            []
            if self.said
            else [Message(self.session.id, self.user_id, "user", self.text, task_id, now)]
        )
        said.append(Message(self.session.id, self.user_id, "assistant", reply, task_id, now))
        self.rt.store.append_messages(said)
        fresh = self.rt.store.get_session(self.session.id, user_id=self.user_id) or self.session
        fresh.context = self.session.context
        for known in self.session.active_task_ids:
            if known not in fresh.active_task_ids:
                fresh.active_task_ids = [*fresh.active_task_ids, known][-20:]
        fresh.language = self.lang
        self.rt.store.put_session(fresh)
        moved: list[Action] = []
        if state is not None:
            before = self.before.get(state.task.id, {})
            moved = [a for a in state.actions if before.get(str(a.seq)) != a.to_dict()]
        return Turn(self.session.id, reply, self.lang, state, moved)
