-- What a turn's timeline showed that has no row of its own: the nudges given to the model before
-- an iteration and the sandbox restarts after a block. Each keeps the seq it was published
-- under, so a timeline rebuilt from the store (after a reload, in another process) shows it at
-- the same place, exactly once. Numbered 0012 so that it cannot collide with migrations other
-- branches add meanwhile (numbers may have gaps; any unrecorded one is applied).

CREATE TABLE turn_note (
    id INTEGER PRIMARY KEY,
    turn_id INTEGER NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('nudge', 'sandbox_restarted')),
    text TEXT NOT NULL,                 -- the nudge; the restart's reason
    restored TEXT NOT NULL DEFAULT '[]', -- restarts: JSON list of the variables restored
    lost TEXT NOT NULL DEFAULT '[]',     -- restarts: JSON list of the variables lost
    created_at REAL NOT NULL,
    UNIQUE (turn_id, seq)
);
