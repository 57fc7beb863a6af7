-- Deliveries kept until they are handled (inbox.py): a sender that cannot be asked again for
-- what it delivered (a Telegram update the webhook acknowledged) has it kept here, in the
-- transaction that records its name in `delivery`, before the delivery is acknowledged. The
-- process that runs it holds a claim it renews; a claim left to expire (the process died) or
-- released (it stopped) lets another process take the row over. A row is deleted once handled.

CREATE TABLE inbox (
    key TEXT PRIMARY KEY,               -- the delivery's name, as in `delivery`
    sender TEXT NOT NULL,               -- whose deliveries: 'telegram:<bot id>'
    lane TEXT,                          -- what it keeps its order in (a chat); NULL: none
    seq INTEGER NOT NULL,               -- its place in the lane (an update's id)
    body TEXT NOT NULL,                 -- what was delivered (an update's JSON)
    received_at REAL NOT NULL,          -- seconds since the epoch
    holder TEXT,                        -- the process running it; NULL: free to take
    held_until REAL NOT NULL,           -- the holder's claim lasts until then
    started_at REAL,                    -- when it started running (it starts once)
    conversation_id TEXT,               -- a turn it started: the conversation
    position INTEGER                    -- and the position that turn takes
);
CREATE INDEX inbox_lane ON inbox (sender, lane, seq);
CREATE INDEX inbox_claim ON inbox (sender, held_until);
