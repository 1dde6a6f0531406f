-- A task's live summaries (not merged into another) without reading the merged ones: at
-- 10,000 turns a task has ~2,500 summary rows and ~30 live ones.
CREATE INDEX live_summaries ON summaries (user_id, task_id, created_at, level, id)
    WHERE merged_into IS NULL;
