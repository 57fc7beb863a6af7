-- Deliveries kept until they are handled (see the SQLite migration of the same number).

CREATE TABLE inbox (
    key TEXT COLLATE "C" PRIMARY KEY,
    sender TEXT COLLATE "C" NOT NULL,
    lane TEXT COLLATE "C",
    seq BIGINT NOT NULL,
    body TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    holder TEXT COLLATE "C",
    held_until DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    conversation_id TEXT COLLATE "C",
    position BIGINT
);
CREATE INDEX inbox_lane ON inbox (sender, lane, seq);
CREATE INDEX inbox_claim ON inbox (sender, held_until);
