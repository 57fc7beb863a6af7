-- Values as content-addressed chunks (issue 25). A version stores its root (inline when short
-- and naming no chunk, else as a chunk) and the chunks of its tree the database does not hold
-- yet: a new version costs what changed. Chunks are shared by every version, fork and
-- conversation whose value holds them, counted in value_ref (versions whose root a chunk is,
-- plus chunks naming it) and collected when nothing counts them any more, in batches of
-- their own transactions (a crash between two leaves every count true). Rows written before
-- keep their inline text or blob and are read as before. Numbered 0019 while other numbers are
-- written on other branches: the migrator applies any number that is not recorded yet.

CREATE TABLE value_chunk (
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,          -- 128 bits of the SHA-256 of data, hex
    data BLOB NOT NULL,
    children TEXT NOT NULL DEFAULT '[]' -- JSON list of the ids of the chunks data names
);

CREATE TABLE value_ref (
    chunk_id INTEGER PRIMARY KEY,       -- value_chunk.id
    refs INTEGER NOT NULL               -- versions whose root it is + chunks that name it
);

CREATE INDEX value_ref_unused ON value_ref(chunk_id) WHERE refs = 0;

ALTER TABLE var_version ADD COLUMN root_chunk INTEGER REFERENCES value_chunk(id);

-- The root's hash: equal values have equal digests, also once a version was thinned.
ALTER TABLE var_version ADD COLUMN digest TEXT;

-- Set when the history budget dropped the version's value (its row, preview and digest stay).
ALTER TABLE var_version ADD COLUMN thinned INTEGER NOT NULL DEFAULT 0;

CREATE INDEX var_version_root ON var_version(root_chunk);

-- The bytes of chunks the conversation's versions added to the database, and that figure when
-- the history budget was last checked (a check is due once it grew by the budget).
ALTER TABLE conversation ADD COLUMN value_bytes INTEGER NOT NULL DEFAULT 0;

ALTER TABLE conversation ADD COLUMN history_mark INTEGER NOT NULL DEFAULT 0;
