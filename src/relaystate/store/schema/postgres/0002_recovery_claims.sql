-- Which recoverer is working on which task, so that concurrent `recover` runs split the work.
CREATE TABLE recovery_claims (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until TIMESTAMPTZ NOT NULL
);
CREATE INDEX recovery_claims_by_owner ON recovery_claims (owner);
