-- Iterations are recorded as they happen: the model's reply as soon as it arrives, each block
-- with its variable versions as it finishes. An iteration cut short by a crash still shows its
-- reply, its finished blocks and, from planned_blocks, which block was running.

-- The code of each block the reply asked to run, as a JSON list of strings, in order.
ALTER TABLE iteration ADD COLUMN planned_blocks TEXT;

-- What the model call cost, so a turn's totals can be summed from its iterations after a crash.
ALTER TABLE iteration ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;

-- The files attached to a turn, as a JSON list of [name, size in bytes]: the request message
-- announces them, and a replay rebuilds that message from here.
ALTER TABLE turn ADD COLUMN attachments TEXT;
