-- Pacing shared by every node on the database (see the SQLite migration of the same number).

CREATE TABLE send_slot (
    key TEXT COLLATE "C" PRIMARY KEY,
    next_at DOUBLE PRECISION NOT NULL
);
