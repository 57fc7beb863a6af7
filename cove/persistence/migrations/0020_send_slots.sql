-- Pacing shared by every process on one database (a channel's calls to an outside API, such
-- as Telegram's Bot API): one row per key (a chat, or the whole bot) holding the earliest time
-- its next call may go out. A process takes a slot by moving that time on with one conditional
-- UPDATE ... RETURNING (pacing.py), so two processes never take the same slot. A slot is a time,
-- never a lock: a process that died leaves nothing held beyond the few seconds it reserved.

CREATE TABLE send_slot (
    key TEXT PRIMARY KEY,
    next_at REAL NOT NULL               -- seconds since the epoch
);
