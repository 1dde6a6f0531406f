-- The change feed of long-term memory: every write to a namespace bumps its generation first
-- and stamps each row it writes (added, replaced, or given a vector) with the new one, so a
-- cache of the namespace catches up by reading only the rows changed after the generation it
-- holds. Rows written before this step keep 0: a cache loads them once, in full. (A constant
-- default: PostgreSQL adds the column without rewriting the table.)
ALTER TABLE memories ADD COLUMN changed BIGINT NOT NULL DEFAULT 0;
CREATE INDEX memories_changed ON memories (user_id, namespace, changed);
