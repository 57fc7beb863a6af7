-- Fenced leases: the epoch of a conversation's lease grows every time a new holder takes it,
-- and every write a turn makes carries the epoch its process acquired; the store refuses a
-- write whose epoch is no longer the conversation's (a takeover happened while it was in
-- flight). Numbered 0005 to leave 0004 to migrations written on other branches.

ALTER TABLE conversation ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
