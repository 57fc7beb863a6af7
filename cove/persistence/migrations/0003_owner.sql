-- Conversations get an owner: the principal a channel acts for (a web user, a Telegram chat).
-- NULL means no owner (the local command line); only the local user sees every conversation.
-- Numbered 0003 while 0002 is written on another branch: the migrator applies any number that
-- is not recorded yet, so both land in either order.

ALTER TABLE conversation ADD COLUMN owner TEXT;

CREATE INDEX conversation_owner ON conversation(owner, updated_at) WHERE owner IS NOT NULL;
