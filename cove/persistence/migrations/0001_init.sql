-- The first schema of the cove database (DESIGN §9).
-- One statement per group of lines: the migrator splits on complete statements.

-- Content-addressed storage for system prompts and large encoded values. Rows are shared by
-- every reference to the same bytes and collected when a deleted conversation was the last one
-- to use them.
CREATE TABLE blob (
    hash TEXT PRIMARY KEY,              -- sha256 hex of data
    data BLOB NOT NULL
);

CREATE TABLE conversation (
    id TEXT PRIMARY KEY,                -- uuid4 hex
    channel TEXT NOT NULL,
    external_id TEXT,
    title TEXT,
    -- A fork points at its parent and the last parent turn it sees; nothing is copied. No
    -- cascade: a conversation with forks cannot be deleted.
    parent_id TEXT REFERENCES conversation(id),
    fork_turn INTEGER,
    workspace TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_until REAL,
    UNIQUE (channel, external_id),
    CHECK ((parent_id IS NULL) = (fork_turn IS NULL))
);

CREATE INDEX conversation_updated ON conversation(updated_at);

CREATE INDEX conversation_parent ON conversation(parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE turn (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,          -- 1-based; a fork's first own turn is fork_turn + 1
    request TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'max_iterations', 'error_budget',
                                           'cancelled', 'failed', 'interrupted')),
    answer TEXT,
    confidence TEXT,
    model TEXT,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    started_at REAL NOT NULL,
    finished_at REAL,
    error TEXT,
    UNIQUE (conversation_id, position)
);

-- Crash recovery looks for running turns on every open; keep that cheap.
CREATE INDEX turn_running ON turn(conversation_id) WHERE status = 'running';

CREATE TABLE iteration (
    id INTEGER PRIMARY KEY,
    turn_id INTEGER NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'error', 'parse_error',
                                           'interrupted', 'cancelled')),
    system_prompt_hash TEXT NOT NULL REFERENCES blob(hash),
    request_message TEXT NOT NULL,
    context_message TEXT NOT NULL,      -- exactly as sent to the model
    raw_reply TEXT,
    thinking TEXT,
    parse_error TEXT,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    llm_ms REAL NOT NULL DEFAULT 0,
    duration_ms REAL NOT NULL DEFAULT 0,
    seed INTEGER,
    started_at REAL NOT NULL,
    UNIQUE (turn_id, position)
);

CREATE INDEX iteration_system_prompt ON iteration(system_prompt_hash);

CREATE TABLE block (
    id INTEGER PRIMARY KEY,
    iteration_id INTEGER NOT NULL REFERENCES iteration(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    code TEXT NOT NULL,
    ok INTEGER NOT NULL,
    result_preview TEXT,
    result_encoded TEXT,                -- inline when small ...
    result_blob TEXT REFERENCES blob(hash),  -- ... or a blob when large, never both
    stdout TEXT NOT NULL DEFAULT '',
    stderr TEXT NOT NULL DEFAULT '',
    error TEXT,
    duration_ms REAL NOT NULL DEFAULT 0,
    timed_out INTEGER NOT NULL DEFAULT 0,
    seed INTEGER,
    clock REAL,
    UNIQUE (iteration_id, position),
    CHECK (result_encoded IS NULL OR result_blob IS NULL)
);

CREATE INDEX block_result_blob ON block(result_blob) WHERE result_blob IS NOT NULL;

CREATE TABLE var_version (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    block_id INTEGER NOT NULL REFERENCES block(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('value', 'function', 'module', 'opaque', 'deleted')),
    encoded TEXT,                       -- codec JSON inline when small ...
    encoded_blob TEXT REFERENCES blob(hash),  -- ... or a blob when large, never both
    type_name TEXT NOT NULL,
    preview TEXT NOT NULL,
    size INTEGER,
    created_at REAL NOT NULL,
    UNIQUE (conversation_id, name, version),
    CHECK (encoded IS NULL OR encoded_blob IS NULL)
);

CREATE INDEX var_version_block ON var_version(block_id);

CREATE INDEX var_version_blob ON var_version(encoded_blob) WHERE encoded_blob IS NOT NULL;

CREATE TABLE subquery (
    id INTEGER PRIMARY KEY,
    iteration_id INTEGER NOT NULL REFERENCES iteration(id) ON DELETE CASCADE,
    block_position INTEGER,
    position INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    reply TEXT,
    model TEXT NOT NULL,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    duration_ms REAL NOT NULL DEFAULT 0,
    error TEXT,
    UNIQUE (iteration_id, position)
);

-- Full-text search: one search_doc row per request, answer or code block; its id is the rowid
-- of the matching search_fts row. The foreign key cascades deletions from turns, and the
-- trigger keeps the FTS table in step with a rowid lookup instead of a full scan.
CREATE TABLE search_doc (
    id INTEGER PRIMARY KEY,
    turn_id INTEGER NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('request', 'answer', 'code'))
);

CREATE INDEX search_doc_turn ON search_doc(turn_id);

CREATE VIRTUAL TABLE search_fts USING fts5(text, tokenize = 'unicode61');

CREATE TRIGGER search_doc_delete AFTER DELETE ON search_doc BEGIN
    DELETE FROM search_fts WHERE rowid = old.id;
END;
