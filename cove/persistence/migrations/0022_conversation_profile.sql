-- A conversation's instructions (a persona, house rules, a task) and its model, versioned: each
-- change is a new row holding both, kept with the turn position it applies from. The profile of
-- turn N is the newest row with from_turn <= N (a fork reads its parent's rows up to the turn
-- after its fork point). Each iteration records the model that answered it (a fallback model
-- when the turn's own was unavailable); NULL for iterations recorded before this migration and
-- for turns with no model.

CREATE TABLE conversation_profile (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
    from_turn INTEGER NOT NULL,         -- the first turn position it applies to
    instructions TEXT,                  -- NULL: none
    model TEXT,                         -- NULL: the configured model
    set_at REAL NOT NULL
);
CREATE INDEX conversation_profile_turn ON conversation_profile(conversation_id, from_turn);

ALTER TABLE iteration ADD COLUMN model TEXT;
