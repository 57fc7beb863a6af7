-- Why an iteration's answer was refused (an undefined {{placeholder}}, a failed block of the same
-- reply): the iteration is an `error`, and every channel shows the reason with it.
ALTER TABLE iteration ADD COLUMN refusal TEXT;

-- Whether the turn's cost is known: false when its model was missing from the price table when
-- it ran (its cost_usd is then 0 but means "unknown", not "free"). Turns recorded before this
-- column: a turn that used tokens and cost nothing was unpriced.
ALTER TABLE turn ADD COLUMN cost_known INTEGER NOT NULL DEFAULT 1;

UPDATE turn SET cost_known = 0 WHERE cost_usd = 0 AND tokens_in + tokens_out > 0;
