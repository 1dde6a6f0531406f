-- Long-term memory: items per user and namespace, a full-text index of their words, and
-- their vectors (one per embedder). ``n`` links the three; ``id`` is the caller's own.
CREATE TABLE memories (
    n INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    at TEXT,
    source TEXT,
    task_id TEXT,
    data TEXT NOT NULL,
    embedded_by TEXT,
    UNIQUE (user_id, namespace, id)
);
-- what still needs a vector, found without reading the namespace (``embedded_by``: the
-- embedder of the item's latest vector; NULL until it has one)
CREATE INDEX memories_unembedded ON memories (user_id, namespace, embedded_by, n);
CREATE INDEX memories_by_time ON memories (user_id, namespace, at);
-- ``owner`` is one token per (user, namespace): a search matches it AND its words, so it
-- ranks only that namespace's items. ``words`` is the text with CJK runs as bigrams.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    owner, words, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE memory_vectors (
    n INTEGER NOT NULL REFERENCES memories (n) ON DELETE CASCADE,
    embedder TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (n, embedder)  -- by item first: replacing one finds its vectors at once
) WITHOUT ROWID;
CREATE TABLE memory_generations (
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    generation INTEGER NOT NULL,
    PRIMARY KEY (user_id, namespace)
) WITHOUT ROWID;
