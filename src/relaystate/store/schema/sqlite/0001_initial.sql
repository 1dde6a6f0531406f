-- The embedded schema as relaystate 0.1 created it (database schema version 1).
-- The runner creates the meta table that records the version; see ../__init__.py.
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX tasks_by_user ON tasks (user_id, status);
CREATE TABLE actions (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    lease_expires_at TEXT,
    data TEXT NOT NULL,
    UNIQUE (task_id, seq)
);
CREATE INDEX open_actions ON actions (lease_expires_at)
    WHERE status IN ('pending', 'running', 'unknown');
CREATE TABLE journal (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;
CREATE TABLE baselines (
    task_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    id INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    task_id TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
) WITHOUT ROWID;
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    build TEXT NOT NULL,
    started_at TEXT NOT NULL,
    stopped_at TEXT
);
