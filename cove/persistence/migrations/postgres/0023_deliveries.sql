-- Deliveries taken once across every node on the database (see the SQLite migration of the
-- same number).

CREATE TABLE delivery (
    key TEXT COLLATE "C" PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL
);
CREATE INDEX delivery_at ON delivery (at);
