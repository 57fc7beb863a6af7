-- What a conversation's sandbox may call and what was decided about its calls (extension_use.py).
-- conversation_extensions: the extensions it was created with (a JSON list of names, used again
-- on reopen, fork and replay) and its own approval policy (a JSON object, name -> allow, ask or
-- deny), which answers a person asked to remember join. approval: one row per extension call
-- the policy did not simply allow, with the block it ran in; replay gives these back.

CREATE TABLE conversation_extensions (
    conversation_id TEXT PRIMARY KEY REFERENCES conversation(id) ON DELETE CASCADE,
    names TEXT NOT NULL,
    policy TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE approval (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
    turn_position INTEGER NOT NULL,
    iteration_position INTEGER NOT NULL,
    block_position INTEGER NOT NULL,
    seq INTEGER NOT NULL,                 -- the call's order among the block's extension calls
    extension TEXT NOT NULL,
    function TEXT NOT NULL,
    effect TEXT NOT NULL,
    arguments TEXT NOT NULL,              -- a short text of the call's arguments
    approved INTEGER NOT NULL,
    reason TEXT NOT NULL,                 -- policy, person, remembered, timeout, nobody, flag
    remember INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    UNIQUE (conversation_id, turn_position, iteration_position, block_position, seq)
);
