-- Stopping a turn another process runs: the process that asks records a request for the running
-- turn; the process holding the conversation's lease notices it while the turn runs, cancels
-- the turn as a local cancel does, and deletes the request when it records the turn's end (or
-- crash recovery does, when it interrupts the turn). One request per turn: asking again keeps
-- the first asker and time. Numbered 0013 so that it cannot collide with migrations other
-- branches add meanwhile (numbers may have gaps; any unrecorded one is applied).

CREATE TABLE cancel_request (
    turn_id INTEGER PRIMARY KEY REFERENCES turn(id) ON DELETE CASCADE,
    requested_by TEXT NOT NULL,         -- who asked: the asking process's lease owner id
    requested_at REAL NOT NULL
);
