-- Valkyrie's saved position and running totals, one row per disk (pochta.blobs.valkyrie).
-- The count columns are pochta.blobs.valkyrie.COUNT_NAMES (a test checks they agree).
CREATE TABLE pochta.valkyrie_disks (
    disk text PRIMARY KEY,
    position text NOT NULL DEFAULT '',
    passes bigint NOT NULL DEFAULT 0,
    last_pass double precision,
    checked bigint NOT NULL DEFAULT 0,
    verified bigint NOT NULL DEFAULT 0,
    repaired bigint NOT NULL DEFAULT 0,
    quarantined bigint NOT NULL DEFAULT 0,
    purged bigint NOT NULL DEFAULT 0,
    orphans bigint NOT NULL DEFAULT 0,
    strays bigint NOT NULL DEFAULT 0,
    tmp_removed bigint NOT NULL DEFAULT 0,
    space1_dropped bigint NOT NULL DEFAULT 0,
    errors bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0
);
