-- Long-term memory: items per user and namespace with their full-text words (CJK runs as
-- bigrams, English stemmed), and their vectors (one per embedder). ``n`` links the two.
CREATE TABLE memories (
    n BIGSERIAL PRIMARY KEY,
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    at TIMESTAMPTZ,
    source TEXT,
    task_id TEXT,
    data JSONB NOT NULL,
    words TSVECTOR NOT NULL,
    embedded_by TEXT,
    UNIQUE (user_id, namespace, id)
);
-- what still needs a vector, found without reading the namespace (``embedded_by``: the
-- embedder of the item's latest vector; NULL until it has one)
CREATE INDEX memories_unembedded ON memories (user_id, namespace, embedded_by, n);
CREATE INDEX memories_words ON memories USING GIN (words);
CREATE INDEX memories_by_time ON memories (user_id, namespace, at);
CREATE TABLE memory_vectors (
    n BIGINT NOT NULL REFERENCES memories (n) ON DELETE CASCADE,
    embedder TEXT NOT NULL,
    vector BYTEA NOT NULL,
    PRIMARY KEY (n, embedder)  -- by item first: replacing one finds its vectors at once
);
CREATE TABLE memory_generations (
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    generation BIGINT NOT NULL,
    PRIMARY KEY (user_id, namespace)
);
