-- The work queue: one row per task with automatic work due (written in the task's commit),
-- claimed by workers with FOR UPDATE SKIP LOCKED; and what `relaystate workers` shows.
CREATE TABLE work (
    task_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    type TEXT NOT NULL,
    template_version INTEGER NOT NULL,
    build TEXT,
    due_at TIMESTAMPTZ NOT NULL,
    owner TEXT,
    lease_until TIMESTAMPTZ
);
CREATE INDEX work_by_due ON work (due_at);
CREATE INDEX work_by_owner ON work (owner) WHERE owner IS NOT NULL;
ALTER TABLE workers ADD COLUMN role TEXT NOT NULL DEFAULT 'worker';
ALTER TABLE workers ADD COLUMN heartbeat_at TIMESTAMPTZ;
