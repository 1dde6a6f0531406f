-- The journal as a rowid table with a unique index on (task_id, version), instead of a
-- WITHOUT ROWID table keyed by them. A WITHOUT ROWID row keeps at most about 1 KB on its leaf
-- page; a delta holding a long slot value (before and after) spilled a fresh overflow page on
-- every commit, and each of those pages was written twice (WAL, then checkpoint). A rowid
-- table keeps up to about 4 KB a row in place and appends to the same last page: measured on
-- a 500-byte answer, about a quarter fewer bytes written per turn and less CPU.
CREATE TABLE journal_by_rowid (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL
);
INSERT INTO journal_by_rowid (task_id, version, at, data)
    SELECT task_id, version, at, data FROM journal ORDER BY task_id, version;
DROP TABLE journal;
ALTER TABLE journal_by_rowid RENAME TO journal;
CREATE UNIQUE INDEX journal_by_task ON journal (task_id, version);
