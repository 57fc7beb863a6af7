-- The delivery a turn answers (see the SQLite migration of the same number).

ALTER TABLE turn ADD COLUMN delivery TEXT COLLATE "C";
