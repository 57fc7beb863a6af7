-- Turn notes say more. Each nudge keeps which rule gave it (``cove.engine.nudges.NudgeKind``):
-- a person is shown only some kinds (why an answer was refused); the others are for the model
-- alone. And a retry of the model endpoint is kept as a note too (its attempt and how many
-- retries the call may make), so a process following the turn from the database shows it as
-- it happens. The kind's CHECK changes, so the table is rebuilt. Notes kept before this get the
-- nudge kind of the rule whose words they start with; anything else came from an extension.
-- Numbered 0017: numbers 0013 to 0016 belong to other branches.

CREATE TABLE turn_note_0017 (
    id INTEGER PRIMARY KEY,
    turn_id INTEGER NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('nudge', 'sandbox_restarted', 'model_retry')),
    text TEXT NOT NULL,                 -- the nudge; the restart's reason; the retry's reason
    restored TEXT NOT NULL DEFAULT '[]', -- restarts: JSON list of the variables restored
    lost TEXT NOT NULL DEFAULT '[]',     -- restarts: JSON list of the variables lost
    created_at REAL NOT NULL,
    nudge_kind TEXT,                    -- nudges: the rule that gave it
    retry_attempt INTEGER,              -- retries: which retry of the call, from 1
    retry_budget INTEGER,               -- retries: how many the call may make
    UNIQUE (turn_id, seq)
);

INSERT INTO turn_note_0017 (id, turn_id, seq, kind, text, restored, lost, created_at, nudge_kind)
SELECT id, turn_id, seq, kind, text, restored, lost, created_at,
       CASE
           WHEN kind <> 'nudge' THEN NULL
           WHEN text LIKE 'Too many iterations failed in a row%' THEN 'strategy_restart'
           WHEN text LIKE 'The sandbox was restarted%' THEN 'sandbox_restart'
           WHEN text LIKE 'Your answer was refused:%' THEN 'refusal'
           WHEN text LIKE 'The last % iterations failed.%' THEN 'error_streak'
           WHEN text LIKE 'Your last % iterations ran the same code%' THEN 'repetition'
           WHEN text LIKE 'This is the last iteration%' THEN 'iterations_left'
           WHEN text LIKE '% iterations left, this one included%' THEN 'iterations_left'
           WHEN text LIKE 'The conversation has no title yet%' THEN 'title'
           WHEN text LIKE '% variables exist and the index shows only the newest%'
               THEN 'var_overflow'
           ELSE 'extension'
       END
FROM turn_note;

DROP TABLE turn_note;
ALTER TABLE turn_note_0017 RENAME TO turn_note;
