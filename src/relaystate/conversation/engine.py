"""One conversational turn: route -> extract -> decide -> (runtime) commit, act, reply.

Routing is by rules first (an explicit task id, a pending pick from a list, cancel / pause /
continue words, the task waiting for an answer, a template's trigger words) and a model
only where rules cannot decide. The engine reads and writes nothing itself: it asks the
runtime for the turn (``begin_turn``: the session and its open tasks in one read), decides
one edit, and commits it with a function that phrases the reply from the state the runtime
leaves; task change, user message, session and reply are one transaction.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import failpoints, inputs
from ..errors import (
    ConfirmationChanged,
    InvalidInput,
    InvalidSlot,
    RepeatedRequest,
    SessionConflict,
    TaskLocked,
    TemplateError,
)
from ..llm import Model, RouteCandidate, RuleModel, SlotSpec
from ..model import Action, Message, TaskState, TaskStatus
from ..runtime.runtime import Runtime
from ..runtime.turns import PendingTurn, ReplyContext, TurnResult
from ..runtime.views import turn_view
from ..scope import Scope, checked
from ..store.turn_memory import Remember
from ..task.edits import Cancel, Confirm, Edit, Fill, Resume, Start
from ..task.next_step import AskConfirmation, AskSlot, NextStep
from ..task.problems import Problem
from ..task.templates import TaskTemplate
from . import elsewhere, questions, replies, routing
from .clock import today
from .extract import Extraction, extract
from .intents import CONTROL, control_word, detect_language, is_no, is_yes
from .replay import replayed
from .text import fold


@dataclass
class Turn:
    """What one turn did: the reply, the task it touched and the actions that moved."""

    session_id: str
    reply: str
    language: str
    state: TaskState | None = None
    actions: list[Action] = field(default_factory=list)
    why: str = ""
    """Why the message went to this Task (or to none): the routing evidence, for people."""
    messages: list[Message] = field(default_factory=list)
    """The user's words and the reply as committed (numbered): what memory records."""
    replayed: bool = False
    """Answered from the turn its request key already committed (nothing done again)."""

    def to_dict(self) -> dict[str, Any]:
        return turn_view(
            session_id=self.session_id,
            reply=self.reply,
            language=self.language,
            state=self.state,
            actions=self.actions,
            why=self.why,
        )


class TurnRecorder(Protocol):
    """What keeps turns in memory (``relaystate.memory.recorder.Recorder``): what its
    ``remember`` asks is written in each turn's own commit."""

    @property
    def remember(self) -> Remember: ...


class Conversation:
    """Talks to one person at a time over a Runtime; all decisions are deterministic."""

    def __init__(
        self, runtime: Runtime, model: Model | None = None, *, memory: TurnRecorder | None = None
    ) -> None:
        self.runtime = runtime
        self.model = model or RuleModel()
        self.memory = memory
        """Keeps each turn in memory, in the turn's commit."""

    def handle(
        self,
        scope: Scope,
        text: str,
        session_id: str | None = None,
        *,
        language: str | None = None,
        task_id: str | None = None,
        request_key: str | None = None,
    ) -> Turn:
        """One turn of the scope's user: read, decide, commit; the Turn says what happened.

        A turn that loses the race for its session to another turn (SessionConflict: nothing
        of it was written) is read and decided again, on what the other turn left. With a
        ``request_key``, a turn that key already committed is answered, not done again
        (:mod:`.replay`), also when the first request is still running: the two race for
        the key, one commits, the other reads that turn back."""
        scope = checked(scope)
        text = inputs.text(text, "text", limit=self.runtime.max_text).strip()
        if not text:
            raise InvalidInput("text", "is empty: there is nothing to say")
        key = inputs.request_key(request_key) if request_key is not None else None
        for attempt in itertools.count(1):
            if key is not None:
                again = replayed(self.runtime, scope, key, text, session_id)
                if again is not None:
                    return Turn(
                        again.session_id,
                        again.reply,
                        again.language,
                        again.state,
                        why="replayed: this request key's turn is already committed",
                        messages=again.messages,
                        replayed=True,
                    )
            pending = self.runtime.begin_turn(scope, session_id, text, language=language)
            pending.request_key = key
            if self.memory is not None:
                pending.memory = self.memory.remember
            lang = language or _language(text, pending.stored_language)
            pending.session.language = lang
            turn = _Turn(self, pending, lang)
            try:
                result = turn.route(task_id)
            except (SessionConflict, RepeatedRequest):
                if attempt >= SESSION_ATTEMPTS:
                    raise
                time.sleep(random.random() * 0.005 * min(attempt, 10))
                continue
            done = Turn(
                result.session.id,
                result.reply,
                lang,
                result.state,
                result.actions,
                turn.why,
                result.messages,
            )
            failpoints.hit("after_turn", result.state.task.type if result.state else None)
            return done
        raise AssertionError("unreachable")


SESSION_ATTEMPTS = 50
"""How often a turn is redone after losing its session to concurrent turns (each loss means
another turn of the same session committed, so the session moves on)."""

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
        self.why = ""

    # -- routing ---------------------------------------------------------------------------
    def route(self, task_id: str | None) -> TurnResult:
        if task_id is not None:
            self.why = "the Task was named explicitly"
            return self._continue(self.p.task(task_id))
        picked = self._picked()
        if picked is not None:
            return picked
        control = control_word(self.text)
        here = self.p.open_here
        named = self._named(here)
        names_one = named is not None or self._named_type() is not None
        if control is None and names_one and _named_control(self.text):
            control = "cancel"  # "机票不订了", "cancel the refund"
        if control is None and here:
            control = _cancel_clause(self.text, named is not None)
        if control in ("cancel", "pause") and named is None:
            # "cancel the refund" while only a flight is open here: the refund, wherever it
            # is open, and never the flight
            other = self._named_elsewhere()
            if other is not None:
                here, named = [other], other
            else:
                kind = self._named_type()
                if kind is not None:
                    self.why = f"a {control} word for a {kind.type}, and none is open"
                    word = replies.words(self.lang)["nothing_open"]
                    return self._say(word.format(title=kind.title(self.lang)))
        if control in ("cancel", "pause") and here:
            target = named or here[0]
            self.why = f"a {control} word, for the {target.task.type} {target.task.id[:8]}"
            if control == "cancel":
                return self._cancel(target)
            title = self.p.template_of(target).title(self.lang)
            return self._say(replies.words(self.lang)["paused"].format(title=title))
        if control == "continue":
            self.why = "a continue word"
            return self._welcome(here[0]) if here else self._choose()
        candidates = routing.rank(
            self.text,
            here=[routing.OpenTask(s, self.p.template_of(s), self.p.next_step(s)) for s in here],
            templates=self.p.templates,
            language=self.lang,
            today=self.today,
        )
        best, close = routing.decide(candidates)
        asked = self._question(here, best)
        if asked is not None:
            return asked
        if best is None and here:
            # "是" to "how much?", "what's the difference?": the Task waiting here asks its
            # question again (the menu would leave it, and a later "yes" would confirm what
            # the user tried to change)
            self.why = f"nothing fits; the {here[0].task.type} {here[0].task.id[:8]} asks again"
            plain = is_yes(self.text) or is_no(self.text)
            return self._continue(here[0], prefix="" if plain else "unclear")
        if best is None and not here:
            answered = self._answers_elsewhere()
            if answered is not None:
                return answered
        if best is None:
            resumed = self._resumed_elsewhere()
            if resumed is not None:
                return resumed
        if best is None:
            self.why = "no Task fits: " + "; ".join(c.explain() for c in candidates[:2])
            routed = self._ask_model()
            if routed is not None:
                self.why = f"the model chose {routed.type}"
                return self._start(routed)
            titles = replies.words(self.lang)["sep"].join(
                t.title(self.lang) for t in self.p.templates
            )
            return self._say(replies.words(self.lang)["help"].format(titles=titles))
        self.why = best.explain()
        if close is not None:
            self.why += " | too close to " + close.explain()
            return self._which(best, close)
        return self._go(best)

    def _named(self, here: list[TaskState]) -> TaskState | None:
        """The open Task here that the message names (its title, keywords, triggers)."""
        folded = fold(self.text)
        for state in here:
            if routing.names(self.p.template_of(state), folded):
                return state
        return None

    def _question(self, here: list[TaskState], best: routing.Candidate | None) -> TurnResult | None:
        """A question about the Task at hand, answered from its state (not with the menu);
        unless the message is plainly a request for something new or an answer."""
        if not here or (best is not None and best.state is None and best.score >= 3.0):
            return None
        if best is not None and best.state is not None and best.extraction.values:
            return None
        target = self._named(here) or here[0]
        template = self.p.template_of(target)
        step = self.p.next_step(target)
        question = questions.read(self.text, template, step)
        if question is None:
            return None
        self.why = f"a question ({question.kind}) about the {target.task.type} {target.task.id[:8]}"

        def phrase(ctx: ReplyContext) -> str:
            assert ctx.state is not None and ctx.step is not None
            said = questions.answer(question, template, ctx.state, ctx.step, self.lang)
            again = replies.reply_for(template, ctx.state, ctx.step, self.lang)
            sep = "" if self.lang == "zh" else " "
            return f"{said}{sep}{again}" if said else again

        return self._commit(Resume(target.task.id), phrase)

    def _go(self, chosen: routing.Candidate) -> TurnResult:
        """Act on the chosen candidate: continue an open Task, or start one (unless an open
        Task of that type elsewhere is the one the user means)."""
        if chosen.state is not None:
            if chosen.resume_only:
                return self._welcome(chosen.state)
            return self._continue(chosen.state, chosen.extraction, chosen.step)
        seen = self._open_elsewhere(chosen)
        if seen.joins is not None:
            joined = seen.joins
            self.why += f" | continues the open {chosen.template.type} {joined.task.id[:8]}"
            # what the message says of a new Task is what it says of this one: read again as
            # the answer to this Task's question, "book a flight" is no date
            held = joined.task.slots
            if all(held.get(k) == v for k, v in chosen.extraction.values.items()):
                return self._welcome(joined)
            return self._continue(joined, chosen.extraction)
        note = ""
        if seen.under_way is not None:
            other = seen.under_way
            self.why += f" | a {other.task.type} like it is under way elsewhere: not joined"
            title = self.p.template_of(other).title(self.lang)
            note = replies.words(self.lang)["under_way"].format(title=title)
        return self._start(chosen.template, chosen.extraction, note=note)

    def _open_elsewhere(self, chosen: routing.Candidate) -> elsewhere.Elsewhere:
        """The open Task of the chosen type from another session that the message may
        continue (resumed rather than duplicated), and one it resembles that is already
        under way (never continued: its result is its own request's); none when the
        message asks for another one."""
        if routing.asks_for_another(self.text):
            return elsewhere.Elsewhere()
        return elsewhere.look(
            chosen.template,
            chosen.extraction,
            self.p.open_tasks(limit=9),
            here={s.task.id for s in self.p.open_here},
            template_of=self.p.template_of,
            next_step=self.p.next_step,
        )

    def _named_type(self) -> TaskTemplate | None:
        folded = fold(self.text)
        return next((t for t in self.p.templates if routing.names(t, folded)), None)

    def _named_elsewhere(self) -> TaskState | None:
        """An open Task of this user (any session) the message names by type or keyword."""
        folded = fold(self.text)
        for state in self.p.open_tasks(limit=9):
            if routing.names(self.p.template_of(state), folded):
                return state
        return None

    def _answers_elsewhere(self) -> TurnResult | None:
        """From a new session, a message that plainly answers what one of the user's open
        Tasks is waiting for (a number for "how many guests?", a date for "which day?") goes
        to that Task: the only one that can take it."""
        waiting = [
            routing.OpenTask(s, self.p.template_of(s), step)
            for s in self.p.open_tasks(limit=9)
            if s.task.status == TaskStatus.WAITING_USER
            and isinstance(step := self.p.next_step(s), AskSlot)
        ]
        if not waiting:
            return None
        candidates = routing.rank(
            self.text, here=waiting, templates=[], language=self.lang, today=self.today
        )
        takers = [
            c
            for c in candidates
            if isinstance(c.step, AskSlot)
            and c.extraction.sources.get(c.step.slot) in routing.STRONG
        ]
        if len(takers) != 1:
            return None
        chosen = takers[0]
        assert chosen.state is not None
        self.why = f"answers what the {chosen.state.task.type} {chosen.state.task.id[:8]} asks"
        return self._continue(chosen.state, chosen.extraction, chosen.step)

    def _resumed_elsewhere(self) -> TurnResult | None:
        """From a new session: the open Task the message names (its type, keywords or one of
        its values: "丽江那张票怎么样了", "about my phone"), else, when it asks to go on
        ("hey it's me again, where were we"), the one open Task or the list to pick from."""
        folded = fold(self.text)
        found = self.p.open_tasks(limit=9)
        for state in found:
            template = self.p.template_of(state)
            held = [fold(str(v)) for v in state.task.slots.values() if isinstance(v, str)]
            if routing.names(template, folded) or any(
                len(v) >= 2 and routing.contains(folded, v) for v in held
            ):
                self.why = f"names the open {state.task.type} {state.task.id[:8]}"
                return self._welcome(state)
        if found and CONTROL["continue"].search(folded):
            self.why = "asks to go on"
            return self._choose()
        return None

    def _which(self, first: routing.Candidate, second: routing.Candidate) -> TurnResult:
        """Two candidates are too close to call: ask, and remember the choice to offer."""
        self.p.session.context["choices"] = [first.key, second.key]
        self.p.session.context["choice_text"] = self.text
        words = replies.words(self.lang)
        options = [self._option(c) for c in (first, second)]
        return self._say(words["which"].format(a=options[0], b=options[1]))

    def _option(self, c: routing.Candidate) -> str:
        words = replies.words(self.lang)
        if c.state is None:
            return words["a_new"].format(title=c.template.title(self.lang))
        summary = replies.summary(c.template, c.state.task, self.lang)
        return words["your"].format(title=c.template.title(self.lang), summary=summary)

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

    def _picked(self) -> TurnResult | None:
        """A number answering a list this session offered: that Task, or a new one started
        from the words that were too close to call."""
        choices = self.p.session.context.get("choices")
        number = re.fullmatch(r"\s*(\d{1,2})\s*[.)）]?\s*", self.text)
        if not choices or number is None:
            return None
        index = int(number.group(1)) - 1
        if not 0 <= index < len(choices):
            return None
        context = self.p.session.context
        context.pop("choices", None)
        earlier = str(context.pop("choice_text", "") or "")
        picked = str(choices[index])
        self.why = f"picked {index + 1} from the list offered"
        if picked.startswith("new:"):
            template = self.conv.runtime.templates[picked.removeprefix("new:")]
            self.text = earlier or self.text
            return self._start(template)
        state = self.p.task(picked)
        if earlier:
            self.text = earlier
            return self._continue(state)
        return self._welcome(state)

    # -- deciding ----------------------------------------------------------------------------
    def _commit(self, edit: Edit | None, phrase: Any) -> TurnResult:
        return self.p.commit(
            edit, lambda ctx: self.conv.model.rephrase(phrase(ctx), language=self.lang)
        )

    def _say(self, text: str) -> TurnResult:
        return self._commit(None, lambda ctx: text)

    def _reply(
        self,
        ctx: ReplyContext,
        error: tuple[str, str] | None = None,
        prefix: str = "",
    ) -> str:
        """The reply from the state the turn left: its next question, or what happened.
        ``error`` is (slot, why its value was refused), said first."""
        words = replies.words(self.lang)
        assert ctx.state is not None and ctx.step is not None
        template = self.p.template_of(ctx.state)
        if isinstance(ctx.error, TaskLocked):
            why = replies.locked(
                ctx.error.code, template, ctx.state.task, ctx.error.action, self.lang
            )
            return words["cannot"].format(reason=why)
        if isinstance(ctx.error, ConfirmationChanged):
            reply = replies.reply_for(template, ctx.state, ctx.step, self.lang)
            return words["changed"] + reply
        if isinstance(ctx.error, InvalidSlot):
            error = (ctx.error.slot, ctx.error.reason)
        error = error or _refused(ctx.state, ctx.step)
        reply = replies.reply_for(template, ctx.state, ctx.step, self.lang)
        if error:
            slot = next((s for s in template.slots if s.name == error[0]), None)
            why = replies.problem(error[1], slot, self.lang)
            reply = words["invalid"].format(reason=why) + reply
        return prefix + reply

    def _start(
        self, template: TaskTemplate, found: Extraction | None = None, *, note: str = ""
    ) -> TurnResult:
        """Start a Task of ``template`` with what the message says; ``note`` is said first."""
        if found is None:
            found = extract(template, self.text, language=self.lang, today=self.today, opening=True)
        opening = template.opening_slot
        if (
            opening is not None
            and opening not in found.values
            and routing.describes(template, self.text)
        ):
            found.values[opening] = template.slot(opening).validate(self.text)
        edit = Start(template.type, found.values, session_id=self.p.session.id)
        first_error = next(iter(found.errors.items()), None)
        return self._commit(edit, lambda ctx: note + self._reply(ctx, first_error))

    def _continue(
        self,
        state: TaskState,
        found: Extraction | None = None,
        step: NextStep | None = None,
        *,
        prefix: str = "",
    ) -> TurnResult:
        """Give the Task what the message holds (values, a yes or no), then its next
        question; ``prefix`` names a reply word said first ("unclear")."""
        task_id = state.task.id
        if not state.task.status.is_open:
            return self._commit(Resume(task_id), self._reply)
        template = self.p.template_of(state)
        step = step if step is not None else self.p.next_step(state)
        expecting = step.slot if isinstance(step, AskSlot) else None
        if found is None:
            found = extract(
                template,
                self.text,
                language=self.lang,
                today=self.today,
                expecting=expecting,
                confirming=isinstance(step, AskConfirmation),
                held=state.task.slots,
            )
        if not (found.values or is_yes(self.text) or is_no(self.text)):
            found.values.update(self._model_values(template))  # rules found nothing
            for name in found.values:
                found.errors.pop(name, None)
        edit: Edit = Resume(task_id)
        prefix = replies.words(self.lang)[prefix] if prefix else ""
        if found.values:
            edit = Fill(task_id, found.values)
        elif isinstance(step, AskConfirmation) and is_yes(self.text):
            # the yes answers the summary this session was shown (none shown here: 0, no
            # version, so the summary is shown first); a change made since elsewhere is never
            # confirmed unseen
            edit = Confirm(task_id, True, seen=self.p.seen().get(task_id, 0))
        elif isinstance(step, AskConfirmation) and is_no(self.text):
            edit = Confirm(task_id, False)
            prefix = replies.words(self.lang)["change_what"]
        error = next(iter(found.errors.items()), None)
        return self._commit(edit, lambda ctx: self._reply(ctx, error, prefix))

    def _model_values(self, template: TaskTemplate) -> dict[str, Any]:
        """Ask the model (if one is configured) for slot values; keep only valid ones."""
        specs = [
            SlotSpec.from_slot(slot, language=self.lang)
            for slot in template.slots
            if slot.filled_by == "user"
        ]
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


def _refused(state: TaskState, step: NextStep) -> tuple[str, str] | None:
    """The value a look-up refused, while the task asks for that slot again."""
    refused = state.task.context.get("rejected")
    if not isinstance(refused, dict) or not isinstance(step, AskSlot):
        return None
    if refused.get("slot") != step.slot:
        return None
    reason = Problem(
        str(refused.get("code") or "custom"),
        str(refused.get("reason") or ""),
        value=refused.get("value"),
        options=refused.get("options") or (),
    )
    return step.slot, reason


_NAMED_CANCEL = re.compile(
    r"^\s*(?:(?:actually|ok|okay|so|and|also|oh|hmm)[\s,]+)*(?:please\s+|帮我|请)?"
    r"(?:cancel|forget|drop|stop|取消)\s*掉?\s*"
    r"(?:the|my|that|那个|这个)?\s*\w+(?:\s+\w+)?\s*[.!。！]?\s*$"
    r"|^\s*\S{1,6}(?:不订了|不要了|不退了|不修了|不办了|不用了|取消了?|算了)\s*[。!！]?\s*$"
    r"|^\s*取消\S{1,6}\s*[。!！]?\s*$"
)


_CLAUSES = re.compile(r"[,，;；.。!！?？…]+")
_SAYS_MORE = re.compile(r"\d|(?<![a-z])(?:make|change|switch|instead|but)(?![a-z])|改|换|但")


def _cancel_clause(text: str, named: bool) -> str | None:
    """ "actually forget about it, i'll just drive", "no don't do it, cancel the refund",
    "唉，不弄了": a cancel that is the first or last clause, when the other clauses only
    explain (no value, no change asked for)."""
    clauses = [c for c in _CLAUSES.split(text) if c.strip()]
    if len(clauses) < 2:
        return None
    for index in (0, len(clauses) - 1):
        clause = clauses[index]
        said = control_word(clause) or (_named_control(clause) if named else None)
        rest = [c for i, c in enumerate(clauses) if i != index]
        if said == "cancel" and not any(_SAYS_MORE.search(fold(c)) for c in rest):
            return said
    return None


def _named_control(text: str) -> str | None:
    """ "机票不订了", "cancel the refund": a cancel that names what it cancels."""
    return "cancel" if _NAMED_CANCEL.match(fold(text)) else None
