-- Which recoverer is working on which task, so that concurrent `recover` runs split the work.
CREATE TABLE recovery_claims (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until TEXT NOT NULL
) WITHOUT ROWID;
