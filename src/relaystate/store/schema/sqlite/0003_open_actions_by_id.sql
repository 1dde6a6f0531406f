-- Recovery pages through open actions by id (keyset), however many there are.
DROP INDEX IF EXISTS open_actions;
CREATE INDEX open_actions_by_id ON actions (id) WHERE status IN ('pending', 'running', 'unknown');
