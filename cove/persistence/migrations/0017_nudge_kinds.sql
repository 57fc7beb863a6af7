-- Which rule gave each nudge a turn showed (``cove.engine.nudges.NudgeKind``): a person is
-- shown only some kinds (why an answer was refused); the others are for the model alone. Notes
-- kept before this column existed are classified by the words each rule starts with; anything
-- else came from an extension. Numbered 0017: numbers 0013 to 0016 belong to other branches.

ALTER TABLE turn_note ADD COLUMN nudge_kind TEXT;

UPDATE turn_note SET nudge_kind = CASE
    WHEN text LIKE 'Too many iterations failed in a row%' THEN 'strategy_restart'
    WHEN text LIKE 'The sandbox was restarted%' THEN 'sandbox_restart'
    WHEN text LIKE 'Your answer was refused:%' THEN 'refusal'
    WHEN text LIKE 'The last % iterations failed.%' THEN 'error_streak'
    WHEN text LIKE 'Your last % iterations ran the same code%' THEN 'repetition'
    WHEN text LIKE 'This is the last iteration%' THEN 'iterations_left'
    WHEN text LIKE '% iterations left, this one included%' THEN 'iterations_left'
    WHEN text LIKE 'The conversation has no title yet%' THEN 'title'
    WHEN text LIKE '% variables exist and the index shows only the newest%' THEN 'var_overflow'
    ELSE 'extension'
END
WHERE kind = 'nudge';
