-- Figures: every figure a block left open, rendered to PNG when it ended (issue 24). The block
-- row keeps what readers show (JSON: position, digest, size, title, axis labels); the PNG bytes
-- are content-addressed blobs, referenced from block_figure so that deleting a conversation
-- collects the ones nobody else uses and a figure can be found by its digest.

ALTER TABLE block ADD COLUMN figures TEXT NOT NULL DEFAULT '[]';

CREATE TABLE block_figure (
    block_id INTEGER NOT NULL REFERENCES block(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    digest TEXT NOT NULL REFERENCES blob(hash),  -- sha256 hex of the PNG
    PRIMARY KEY (block_id, position)
);

CREATE INDEX block_figure_digest ON block_figure(digest);
