-- The delivery a turn answers (inbox.py): `start_turn` records its name with the turn, so a
-- process taking over a delivery whose holder died tells "its turn was recorded" from "it was
-- not" by the turn itself, not by what the turn asked. NULL: a turn nobody delivered from
-- outside (every turn of the web, the CLI and the TUI).

ALTER TABLE turn ADD COLUMN delivery TEXT;
