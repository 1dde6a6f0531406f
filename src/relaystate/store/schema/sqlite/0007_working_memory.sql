-- Working memory and the memory graph: facts (subject predicate object) with validity
-- intervals, append-only (a new value closes the old one); and summaries of a task's older
-- turns that cite them, merged recursively. ``subject_key`` and ``node`` are the lower-cased
-- subject and text object: the nodes a graph walk follows.
CREATE TABLE facts (
    seq INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    predicate TEXT NOT NULL,
    object TEXT,
    node TEXT,
    valid_from TEXT NOT NULL,
    valid_to TEXT,
    source TEXT,
    task_id TEXT,
    single INTEGER NOT NULL
);
CREATE INDEX facts_by_subject ON facts (user_id, subject_key, predicate);
CREATE INDEX facts_by_node ON facts (user_id, node);
CREATE TABLE summaries (
    user_id TEXT NOT NULL,
    id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    level INTEGER NOT NULL,
    text TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL,
    merged_into TEXT,
    PRIMARY KEY (user_id, id)
) WITHOUT ROWID;
CREATE INDEX summaries_by_task ON summaries (user_id, task_id, created_at);
