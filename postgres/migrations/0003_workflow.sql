-- Workflow routes (docs/design.md §13). A message of a workflow goes through its
-- steps on their implicit routes; these columns say where it stands.
--
-- workflow: the workflow route; NULL for other messages.
-- step: the step being delivered or, while failed_step is set, undone.
-- failed_step: the step that failed for good; 0 while none has.
-- step_responses: the responses of the steps done, as a JSON object keyed
--   by step number ({"1": "...", ...}); NULL when there are none, so that
--   a message without a workflow costs no JSON work. It is text, not
--   jsonb: jsonb refuses \u0000, which a receiver's response may hold, and
--   nothing queries inside it.
ALTER TABLE messages
    ADD COLUMN workflow text,
    ADD COLUMN step integer NOT NULL DEFAULT 0,
    ADD COLUMN failed_step integer NOT NULL DEFAULT 0,
    ADD COLUMN step_responses text;
