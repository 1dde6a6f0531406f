-- The PostgreSQL schema, version 1: the embedded schema with real types.
-- Task, action, journal and session state is JSONB (the model's dict form, the one shape);
-- what queries filter or sort on is also a typed column. The runner creates the meta table
-- that records the version; see ../__init__.py.

CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    data JSONB NOT NULL
) WITH (fillfactor = 80);  -- room for HOT updates: a task row is rewritten every turn

-- "The open tasks of user U", from any session or device.
CREATE INDEX tasks_by_user ON tasks (user_id, status);

CREATE TABLE actions (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    lease_expires_at TIMESTAMPTZ,
    data JSONB NOT NULL,
    CONSTRAINT actions_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT actions_task_seq UNIQUE (task_id, seq)
);

-- "Actions to reconcile", oldest lease first: only unsettled actions are in it.
CREATE INDEX open_actions ON actions (lease_expires_at NULLS FIRST)
    WHERE status IN ('pending', 'running', 'unknown');

CREATE TABLE journal (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    data JSONB NOT NULL,
    PRIMARY KEY (task_id, version)
);

CREATE TABLE baselines (
    task_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    data JSONB NOT NULL
);

-- A session id belongs to one user for good: an upsert arbitrates on (id, user_id), so
-- another user's id violates the primary key and the whole commit rolls back.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    data JSONB NOT NULL,
    CONSTRAINT sessions_owner UNIQUE (id, user_id)
);

-- Messages are numbered 1, 2, ... per session; this row is the per-session counter that
-- concurrent writers serialise on (an upsert always sees the latest committed count).
CREATE TABLE message_counters (
    session_id TEXT PRIMARY KEY,
    last_id BIGINT NOT NULL
) WITH (fillfactor = 80);

CREATE TABLE messages (
    session_id TEXT NOT NULL,
    id BIGINT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    task_id TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, id)
);

CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    build TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    stopped_at TIMESTAMPTZ
);
