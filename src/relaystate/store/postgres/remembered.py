"""A turn's memory as parts of its commit statement on PostgreSQL.

The commit is one statement of data-modifying CTEs (``t`` the task row, ``mn`` the turn's
messages as numbered); these parts add the namespace's generation, the messages' long-term
items with their ``tsvector`` (stamped with that generation), and the task's slots recorded
against its open facts, all gated on ``t`` like the rest. The facts' advisory locks (the
same keys as :meth:`PostgresWorkingMemory.record_facts`) are taken by a statement before it,
in the same transaction: a statement reads the facts as of its start, so the lock must be
held by then.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import datetime

from psycopg.types.json import Jsonb

from ...model import Message, Task
from ..terms import index_text, node_key
from ..turn_memory import TURN, Remember, subject
from .memories import CONFIG

ITEMS = f"""mg AS (
    INSERT INTO memory_generations (user_id, namespace, generation)
    SELECT DISTINCT user_id, %(remember)s::text, 1 FROM mn ORDER BY user_id
    ON CONFLICT (user_id, namespace) DO UPDATE
        SET generation = memory_generations.generation + 1
    RETURNING user_id, generation
),
mo AS (
    DELETE FROM memory_vectors v USING memories m, mn
    WHERE v.n = m.n AND m.user_id = mn.user_id AND m.namespace = %(remember)s::text
        AND m.id = mn.session_id || ':' || mn.id
        AND v.embedder IS DISTINCT FROM %(vec_embedder)s::text
        AND EXISTS (SELECT FROM mg)
),
mm AS (
    INSERT INTO memories (id, user_id, namespace, text, at, source, task_id, data, words,
        embedded_by, changed)
    SELECT mn.session_id || ':' || mn.id, mn.user_id, %(remember)s::text, mn.text,
        mn.created_at, '{TURN}', coalesce(mn.task_id, %(remember_task)s::text),
        jsonb_build_object(
            'metadata',
            jsonb_build_object('session', mn.session_id, 'role', mn.role, 'message', mn.id),
            'cites', '[]'::jsonb, 'added_at', mn.added_at),
        to_tsvector('{CONFIG}', mn.words), %(vec_embedder)s::text, mg.generation
    FROM mn JOIN mg USING (user_id)
    ON CONFLICT (user_id, namespace, id) DO UPDATE SET
        text = EXCLUDED.text, at = EXCLUDED.at, source = EXCLUDED.source,
        task_id = EXCLUDED.task_id, data = EXCLUDED.data, words = EXCLUDED.words,
        embedded_by = EXCLUDED.embedded_by, changed = EXCLUDED.changed
    RETURNING n, id
),
mv AS (
    INSERT INTO memory_vectors (n, embedder, vector)
    SELECT mm.n, %(vec_embedder)s::text, decode(mn.vector, 'base64')
    FROM mm JOIN mn ON mm.id = mn.session_id || ':' || mn.id
    WHERE %(vec_embedder)s::text IS NOT NULL
    ON CONFLICT (n, embedder) DO UPDATE SET vector = EXCLUDED.vector
)"""
"""The messages' long-term items (replacing any of the same id, whose vectors go), and
their vectors when the commit brings them. ``mg`` bumps the namespace's generation first
(its row locked until the commit, as every writer of the namespace does first) and ``mm``
stamps the items with the new one, reading it from ``mg``'s RETURNING: the change feed
(:meth:`~relaystate.store.roles.Memories.memory_changes`)."""

FACTS = """fs AS (
    SELECT f->>'p' AS predicate, f->'o' AS object, f->>'node' AS node
    FROM jsonb_array_elements(%(facts)s::jsonb) AS f
    WHERE EXISTS (SELECT FROM t)
),
fo AS (
    SELECT o.seq, o.predicate, o.object, o.valid_from FROM facts o
    WHERE o.user_id = %(user_id)s AND o.subject_key = %(fact_key)s AND o.valid_to IS NULL
        AND o.predicate IN (SELECT predicate FROM fs)
),
fc AS (
    SELECT fs.* FROM fs WHERE NOT EXISTS (
        SELECT FROM fo WHERE fo.predicate = fs.predicate AND fo.object = fs.object)
),
fx AS (
    UPDATE facts SET valid_to = greatest(%(entry_at)s::timestamptz, fo.valid_from)
    FROM fo JOIN fc USING (predicate) WHERE facts.seq = fo.seq
),
fi AS (
    INSERT INTO facts (user_id, subject, subject_key, predicate, object, node, valid_from,
        source, task_id, single)
    SELECT %(user_id)s, %(fact_subject)s, %(fact_key)s, fc.predicate, fc.object, fc.node,
        %(entry_at)s::timestamptz, {source}, %(id)s, true
    FROM fc WHERE fc.object <> 'null'::jsonb
)"""
"""The task's slots against its open facts: an equal value stays, a changed one closes the
old and opens the new, None only closes."""

_SOURCE = "(SELECT session_id || ':' || id FROM mn ORDER BY n LIMIT 1)"

LOCKS = (
    "SELECT pg_advisory_xact_lock(hashtextextended(k, 0))"
    " FROM (SELECT k FROM unnest(%s::text[]) AS k ORDER BY k) AS sorted"
)
"""The facts' locks, in one order (two commits never wait for each other in a circle)."""


def message_fields(
    messages: Sequence[Message], at: datetime | None, remember: Remember
) -> list[dict[str, str]]:
    """What the items need beyond a message's own columns: its indexed words, when it was
    added (``at``, the commit's time; None: the message's own) and its vector, if made."""
    fields = [
        {"words": index_text(m.text), "added_at": (at or m.created_at).isoformat()}
        for m in messages
    ]
    if remember.vectors is not None:
        blobs = remember.vectors.make([m.text for m in messages])
        for row, blob in zip(fields, blobs, strict=True):
            row["vector"] = base64.b64encode(blob).decode()
    return fields


def facts_part(task: Task, params: dict[str, object], with_messages: bool) -> tuple[str, list[str]]:
    """The facts CTEs for ``task``'s slots, their parameters added to ``params``; and the
    advisory-lock keys to take first."""
    about = subject(task.id)
    key = node_key(about) or about
    params["fact_subject"], params["fact_key"] = about, key
    params["facts"] = Jsonb(
        [
            {"p": name, "o": value, "node": node_key(value)}
            for name, value in sorted(task.slots.items())
        ]
    )
    locks = [json.dumps([task.user_id, key, name]) for name in sorted(task.slots)]
    return FACTS.format(source=_SOURCE if with_messages else "NULL::text"), locks


def items_part(remember: Remember, task_id: str | None, params: dict[str, object]) -> str:
    params["remember"], params["remember_task"] = remember.namespace, task_id
    params["vec_embedder"] = remember.vectors.embedder if remember.vectors else None
    return ITEMS
