-- Conversations get an owner: the principal a channel acts for (a web user, a Telegram chat).
-- NULL means no owner (the local command line); only the local user sees every conversation.
-- Numbered 0003 while 0002 is written on another branch: the migrator applies any number that
-- is not recorded yet, so both land in either order.

ALTER TABLE conversation ADD COLUMN owner TEXT;

CREATE INDEX conversation_owner ON conversation(owner, updated_at) WHERE owner IS NOT NULL;

-- Messages the person sent while a turn ran ("steering"), with the iteration whose context
-- message first showed them to the model; replay shows them at the same place again.
CREATE TABLE steering (
    id INTEGER PRIMARY KEY,
    iteration_id INTEGER NOT NULL REFERENCES iteration(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (iteration_id, position)
);
