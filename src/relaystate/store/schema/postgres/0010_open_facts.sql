-- A turn records its task's slots against the task's open facts, in its commit: one read of
-- the subject's open facts, whose cost must not grow with the history of closed ones.
CREATE INDEX open_facts ON facts (user_id, subject_key) WHERE valid_to IS NULL;
