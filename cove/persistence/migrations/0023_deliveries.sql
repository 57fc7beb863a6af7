-- Deliveries from outside taken once across every process on one database: a sender that
-- may deliver the same thing twice (Telegram re-posts an update its webhook did not
-- acknowledge in time, and behind a proxy the second post may reach another node) names each
-- delivery, and the first process to record the name handles it (deliveries.py). Names older
-- than the sender's redelivery window are deleted as new ones arrive.

CREATE TABLE delivery (
    key TEXT PRIMARY KEY,
    at REAL NOT NULL                    -- seconds since the epoch
);
CREATE INDEX delivery_at ON delivery (at);
