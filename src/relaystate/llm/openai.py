"""A model behind any OpenAI-compatible chat-completions endpoint, checked at every step.

Works with OpenAI itself and with the servers that speak its wire protocol (vLLM, llama.cpp,
Ollama, LiteLLM, ...): one ``POST {base_url}/chat/completions`` per question, ``temperature``
0, and for ``route`` and ``extract`` a strict JSON schema as ``response_format`` so that a
capable server constrains the answer to it.

Nothing that comes back is trusted. The HTTP status, the body, the completion's shape, refusals
and truncation are checked; a JSON answer is parsed strictly and validated against the very
schema that was sent (types, enums, required and extra keys), then against what the schema
cannot say (a real calendar date, a confidence in [0, 1]). Any failure is logged as a warning
and the method declines (``None``, or the unchanged reply for ``rephrase``), so the caller
falls back to what it does without a model: ask the user.

Each attempt has one overall deadline, ``timeout`` seconds from connecting to the last byte of
the body (a server that trickles bytes cannot stretch it). Timeouts, dropped connections, 408,
429 and 5xx answers are retried up to ``retries`` times, waiting ``backoff``, then twice that,
and so on; other answers are not, since at temperature 0 they would come back the same. The
API key is sent in the ``Authorization`` header and nowhere else: it is not logged, not in the
``repr``, and it is masked in any error text a server echoes back.

The standard library's ``http.client`` carries the requests, so the package gains no
dependency and the deadline holds for the whole exchange; HTTP proxies are not used.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from .base import RouteCandidate, RouteChoice, SlotSpec
from .endpoint import Endpoint, strict_json, with_retries
from .endpoint import EndpointError as Unusable
from .env import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 1 << 20
"""A larger body is no answer to these short questions; reading stops there."""
REPHRASE_MAX_GROWTH = 3
"""A rewording longer than this many times the original is not a rewording."""
SUMMARY_MAX_CHARS_PER_WORD = 8
"""Character budget per requested word, for languages that do not separate words by spaces."""

_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DIGITS = re.compile(r"[0-9]+")
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```$", re.DOTALL)


class OpenAICompatibleModel:
    """A ``Model`` served by an OpenAI-compatible chat-completions endpoint.

    ``base_url`` is the part before ``/chat/completions`` (``https://api.openai.com/v1``,
    ``http://localhost:11434/v1``). ``api_key`` may be empty for servers that need none.
    ``timeout`` bounds each attempt, ``retries`` counts the extra attempts after a transient
    failure, ``backoff`` is the first wait between attempts (doubling after that).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        self._endpoint = Endpoint.parse(
            base_url,
            "/chat/completions",
            what="model",
            api_key=api_key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )
        if not model.strip():
            raise ValueError("a model name is required")
        self.base_url = self._endpoint.base_url
        self.model = model.strip()
        self.timeout = self._endpoint.timeout
        self.retries = self._endpoint.retries
        self.backoff = self._endpoint.backoff

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.5,
    ) -> OpenAICompatibleModel | None:
        """The model the environment configures, or None when base URL or model name is unset.

        Reads ``RELAYSTATE_MODEL_BASE_URL``, ``RELAYSTATE_MODEL_NAME`` and, if set,
        ``RELAYSTATE_MODEL_API_KEY``. A base URL that is set but malformed raises ValueError:
        a misconfiguration should stop the process at start, not quietly disable the model.
        """
        env = os.environ if environ is None else environ
        base_url = env.get(ENV_BASE_URL, "").strip()
        model = env.get(ENV_MODEL, "").strip()
        if not base_url or not model:
            return None
        return cls(
            base_url,
            env.get(ENV_API_KEY, "").strip(),
            model,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel(base_url={self.base_url!r}, model={self.model!r})"

    # -- the four questions ------------------------------------------------------------------

    def route(
        self, text: str, candidates: Sequence[RouteCandidate], *, language: str
    ) -> RouteChoice | None:
        """The candidate the model picks for ``text``, if its answer checks out; else None."""
        if not candidates:
            return None
        ids = [c.id for c in candidates]
        schema = _route_schema(ids)
        listing = "\n".join(f"- {c.id}: {c.description}" for c in candidates)
        system = (
            "You decide which of the user's tasks a message belongs to. The tasks, as "
            f"'id: description':\n{listing}\n"
            "Answer with the id of the task the message is about, or null if it is unclear or "
            "about none of them, and your confidence between 0 and 1. The user writes in "
            f"language '{language}'."
        )
        try:
            answer = self._ask_json("route", system, text, "route_choice", schema)
            chosen = answer["id"]
            confidence = answer["confidence"]
            if not 0 <= confidence <= 1:
                raise Unusable(f"confidence {confidence!r} is outside [0, 1]")
        except Unusable as exc:
            self._decline("route", exc)
            return None
        except Exception:
            log.warning("model route failed unexpectedly; falling back", exc_info=True)
            return None
        if chosen is None:
            log.info("model route: the model could not tell which task is meant")
            return None
        return RouteChoice(chosen, float(confidence))

    def extract(
        self, text: str, slots: Sequence[SlotSpec], *, language: str, today: date
    ) -> dict[str, Any] | None:
        """The slot values the model finds in ``text``, if its answer checks out; else None.

        One wrong value (a wrong type, a choice not offered, an impossible date) discards the
        whole answer: a model that got one field wrong is not trusted with the others.
        """
        if not slots:
            return {}
        schema = _extract_schema(slots)
        listing = "\n".join(_describe_slot(s) for s in slots)
        system = (
            "You extract values from the user's message for these fields:\n"
            f"{listing}\n"
            "Use null for every field the message does not state; never guess or fill in "
            f"defaults. Today is {today.isoformat()} ({today.strftime('%A')}): write dates "
            "as YYYY-MM-DD, resolving relative dates such as 'tomorrow' against today. Write "
            "numbers as JSON numbers and choices exactly as listed. The user writes in "
            f"language '{language}'."
        )
        try:
            answer = self._ask_json("extract", system, text, "slot_values", schema)
            values: dict[str, Any] = {}
            for spec in slots:
                value = answer[spec.name]
                if value is None:
                    continue
                if spec.kind == "date":
                    _check_calendar_date(spec.name, value)
                if isinstance(value, str):
                    value = value.strip()
                    if not value:
                        continue
                values[spec.name] = value
        except Unusable as exc:
            self._decline("extract", exc)
            return None
        except Exception:
            log.warning("model extract failed unexpectedly; falling back", exc_info=True)
            return None
        return values

    def summarize(self, texts: Sequence[str], *, language: str, max_words: int) -> str | None:
        """The model's summary of ``texts``, or None if it is empty or longer than asked."""
        if not texts or max_words < 1:
            return None
        system = (
            f"Summarize the conversation excerpts the user sends in at most {max_words} words, "
            f"in language '{language}'. Keep names, numbers, dates and ids exactly as written. "
            "Answer with the summary only, as plain text."
        )
        excerpts = "\n\n---\n\n".join(texts)
        try:
            summary = self._ask_text("summarize", system, excerpts)
            words = len(summary.split())
            if words > max_words or len(summary) > max_words * SUMMARY_MAX_CHARS_PER_WORD:
                raise Unusable(f"summary of {words} words exceeds the {max_words} asked for")
        except Unusable as exc:
            self._decline("summarize", exc)
            return None
        except Exception:
            log.warning("model summarize failed unexpectedly; falling back", exc_info=True)
            return None
        return summary

    def rephrase(self, reply: str, *, language: str) -> str:
        """The model's rewording of ``reply`` if it keeps every number; else ``reply`` itself.

        The fact check is cheap and strict: every digit group of the reply (amounts, dates,
        times, flight numbers, ids) must appear in the rewording at least as often, and the
        rewording may bring no digit group of its own. It must also be non-empty and at most
        three times as long.
        """
        if not reply.strip():
            return reply
        system = (
            "Rewrite the assistant reply the user sends so that it reads naturally in language "
            f"'{language}'. Keep every fact: names, numbers, dates, times, amounts, codes and "
            "ids exactly as written. Add nothing: no new information, questions or greetings. "
            "Answer with the rewritten reply only."
        )
        try:
            rewording = self._ask_text("rephrase", system, reply)
            if len(rewording) > REPHRASE_MAX_GROWTH * len(reply):
                raise Unusable("the rewording is too long")
            kept = Counter(_DIGITS.findall(rewording))
            wanted = Counter(_DIGITS.findall(reply))
            dropped = sorted(wanted - kept)
            if dropped:
                raise Unusable(f"the rewording drops {', '.join(dropped)}")
            added = sorted(set(kept) - set(wanted))
            if added:
                raise Unusable(f"the rewording adds {', '.join(added)}")
        except Unusable as exc:
            self._decline("rephrase", exc)
            return reply
        except Exception:
            log.warning("model rephrase failed unexpectedly; keeping the reply", exc_info=True)
            return reply
        return rewording

    # -- asking ------------------------------------------------------------------------------

    def ask_json(
        self, purpose: str, system: str, user: str, name: str, schema: dict[str, Any]
    ) -> dict[str, Any]:
        """One question with a JSON answer constrained by ``schema`` (a strict
        ``json_schema`` response format; objects, arrays, types, enums and patterns are
        checked again on the answer), for callers with questions of their own (the memory's
        fact extraction). Transient failures are retried as for the four questions; what
        is still no usable answer raises :class:`~relaystate.llm.endpoint.EndpointError`,
        whose ``reason`` may be logged after :meth:`redact`. ``purpose`` names the
        question in log lines."""
        return self._ask_json(purpose, system, user, name, schema)

    def redact(self, text: str) -> str:
        """``text`` with the API key masked, should a server have echoed it back."""
        return self._endpoint.redact(text)

    def _ask_json(
        self, purpose: str, system: str, user: str, name: str, schema: dict[str, Any]
    ) -> dict[str, Any]:
        """Ask for JSON constrained by ``schema``; the parsed answer, valid against it."""
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": True, "schema": schema},
        }
        content = self._complete(purpose, system, user, response_format)
        fenced = _FENCE.match(content)
        if fenced:  # some servers wrap JSON in a Markdown fence despite the response format
            content = fenced.group(1).strip()
        answer = strict_json(content, "the answer")
        problem = _schema_problem(answer, schema, "$")
        if problem:
            raise Unusable(f"the answer does not match the schema: {problem}")
        assert isinstance(answer, dict)  # the schema's root is an object
        return answer

    def _ask_text(self, purpose: str, system: str, user: str) -> str:
        return self._complete(purpose, system, user, None)

    def _complete(
        self, purpose: str, system: str, user: str, response_format: dict[str, Any] | None
    ) -> str:
        """The completion's text, with transient failures retried; raises Unusable."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
        }
        if response_format is not None:
            payload["response_format"] = response_format
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")

        def note(exc: Unusable, attempt: int, delay: float) -> None:
            log.info(
                "model %s: %s; retry %d of %d in %.2fs",
                purpose,
                self._redact(exc.reason),
                attempt,
                self.retries,
                delay,
            )

        return with_retries(
            lambda: _completion_text(self._endpoint.post_json(body, max_bytes=MAX_RESPONSE_BYTES)),
            retries=self.retries,
            backoff=self.backoff,
            failure=Unusable,
            note=note,
        )

    def _decline(self, purpose: str, exc: Unusable) -> None:
        log.warning(
            "model %s (%s at %s) gave no usable answer, falling back: %s",
            purpose,
            self.model,
            self.base_url,
            self._redact(exc.reason),
        )

    def _redact(self, text: str) -> str:
        """``text`` with the API key masked, should a server have echoed it back."""
        return self._endpoint.redact(text)


# -- schemas ---------------------------------------------------------------------------------


def _route_schema(ids: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "id": {
                "type": ["string", "null"],
                "enum": [*ids, None],
                "description": "the id of the task the message belongs to, or null if unclear",
            },
            "confidence": {
                "type": "number",
                "description": "how sure you are, from 0 (guess) to 1 (certain)",
            },
        },
        "required": ["id", "confidence"],
        "additionalProperties": False,
    }


def _extract_schema(slots: Sequence[SlotSpec]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for spec in slots:
        prop: dict[str, Any]
        if spec.kind == "choice":
            prop = {"type": ["string", "null"], "enum": [*spec.choices, None]}
        elif spec.kind == "number":
            prop = {"type": ["number", "null"]}
        elif spec.kind == "date":
            prop = {"type": ["string", "null"], "pattern": _DATE_PATTERN}
        else:
            prop = {"type": ["string", "null"]}
        if spec.description:
            prop["description"] = spec.description
        properties[spec.name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [spec.name for spec in slots],
        "additionalProperties": False,
    }


def _describe_slot(spec: SlotSpec) -> str:
    line = f"- {spec.name} ({spec.kind})"
    if spec.description:
        line += f": {spec.description}"
    if spec.choices:
        line += f" [one of: {', '.join(spec.choices)}]"
    return line


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _schema_problem(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """What makes ``value`` invalid against ``schema`` (the subset built here), or None."""
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, t) for t in allowed):
            return f"{path} is {_short(value)}, expected {' or '.join(allowed)}"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"{path} is {_short(value)}, not one of the allowed values"
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{path} is {_short(value)}, not of the form {schema['pattern']}"
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                return f"{path} lacks {key!r}"
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(properties))
            if extra:
                return f"{path} has unexpected keys {', '.join(map(repr, extra))}"
        for key, sub in properties.items():
            if key in value:
                problem = _schema_problem(value[key], sub, f"{path}.{key}")
                if problem:
                    return problem
    if isinstance(value, list) and "items" in schema:
        for i, element in enumerate(value):
            problem = _schema_problem(element, schema["items"], f"{path}[{i}]")
            if problem:
                return problem
    return None


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("number", "integer"):
        return False  # JSON true is not 1
    return isinstance(value, _JSON_TYPES.get(name, ()))


def _same(value: Any, option: Any) -> bool:
    return type(value) is type(option) and value == option


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_calendar_date(name: str, value: Any) -> None:
    try:
        date.fromisoformat(value)
    except (TypeError, ValueError):
        raise Unusable(f"$.{name} is {_short(value)}, not a calendar date") from None


# -- the wire --------------------------------------------------------------------------------


def _completion_text(body: Any) -> str:
    """The text of the first choice of a chat completion, after checking its shape."""
    if not isinstance(body, dict):
        raise Unusable("the response body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise Unusable("the response has no choices")
    first = choices[0]
    message = first.get("message")
    if not isinstance(message, dict):
        raise Unusable("the first choice has no message")
    refusal = message.get("refusal")
    if refusal:
        raise Unusable(f"the model refused: {_short(refusal)}")
    finish = first.get("finish_reason")
    if finish in ("length", "content_filter"):
        raise Unusable(f"the answer was cut off ({finish})")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise Unusable("the message has no text content")
    return content.strip()
