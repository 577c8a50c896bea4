-- FileDB (seed 004): space0, space1 and the journal of exactly-once counts.
--
-- Every step is one call of pochta.filedb_step (or of pochta.filedb_steps for a group of
-- steps from concurrent callers, one transaction, one commit). A step first takes a
-- transaction-scoped advisory lock on its key (the first 8 bytes of the SHA-256, computed by
-- the caller), so all steps on one key are serialized as in the embedded backend, whatever
-- mix of rows (live, deleted, journal) they touch; steps on different keys run in parallel.
-- Callers order the steps of a group by that lock number, so two groups cannot deadlock.

CREATE TABLE pochta.filedb_live (
    key bytea PRIMARY KEY,
    counter bigint NOT NULL,
    magic bigint NOT NULL CHECK (magic >= 0 AND magic < 4294967296),
    flags integer NOT NULL,
    pair integer NOT NULL
) WITH (fillfactor = 90);  -- room on each page for HOT updates of counter and magic

CREATE INDEX filedb_live_by_pair ON pochta.filedb_live (pair, key);

CREATE TABLE pochta.filedb_deleted (
    key bytea PRIMARY KEY,
    pair integer NOT NULL,
    moved_at double precision NOT NULL
);

CREATE TABLE pochta.filedb_ops (op bytea PRIMARY KEY);

-- What a step returns. status: 0 done (or replayed), 1 not found (nothing was written).
-- space: 0 live, 1 deleted (then counter and magic are 0 and moved_at is set).
CREATE TYPE pochta.filedb_result AS (
    status smallint,
    counter bigint,
    magic bigint,
    flags integer,
    pair integer,
    space smallint,
    moved_at double precision
);

-- The record as it is: live, else space1, else status 1.
CREATE FUNCTION pochta.filedb_current(k bytea) RETURNS pochta.filedb_result
LANGUAGE plpgsql AS $$
DECLARE
    r pochta.filedb_result;
BEGIN
    SELECT 0, l.counter, l.magic, l.flags, l.pair, 0, NULL INTO r
        FROM pochta.filedb_live l WHERE l.key = k;
    IF FOUND THEN
        RETURN r;
    END IF;
    SELECT 0, 0, 0, 0, d.pair, 1, d.moved_at INTO r
        FROM pochta.filedb_deleted d WHERE d.key = k;
    IF FOUND THEN
        RETURN r;
    END IF;
    RETURN ROW(1, NULL, NULL, NULL, NULL, NULL, NULL)::pochta.filedb_result;
END
$$;

-- One FileDB step (pochta.blobs.counting, in SQL).
--   kind  'i' inc, 'u' upsert (after an upload, on pair p), 'd' dec (moved_at = now)
--   k     the 32-byte key;   lk  its advisory lock number;   m  the magic, 1..2^32-1
--   op    the operation id, or NULL: a journaled op is a replay and changes nothing
CREATE FUNCTION pochta.filedb_step(
    kind "char", k bytea, lk bigint, m bigint, p integer, op bytea, now double precision
) RETURNS pochta.filedb_result
LANGUAGE plpgsql AS $$
DECLARE
    r pochta.filedb_result;
    c bigint;
    total bigint;
    f integer;
    pr integer;
BEGIN
    PERFORM pg_advisory_xact_lock(lk);
    IF op IS NOT NULL THEN
        INSERT INTO pochta.filedb_ops (op) VALUES (op) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN  -- journaled already: a replay
            RETURN pochta.filedb_current(k);
        END IF;
    END IF;

    IF kind = 'i' THEN
        UPDATE pochta.filedb_live l
            SET counter = l.counter + 1, magic = (l.magic + m) % 4294967296
            WHERE l.key = k
            RETURNING 0, l.counter, l.magic, l.flags, l.pair, 0, NULL INTO r;
        IF FOUND THEN
            RETURN r;
        END IF;

    ELSIF kind = 'u' THEN
        INSERT INTO pochta.filedb_live AS l (key, counter, magic, flags, pair)
            VALUES (k, 1, m, 0, p)
            ON CONFLICT (key) DO UPDATE
                SET counter = l.counter + 1, magic = (l.magic + m) % 4294967296
            RETURNING 0, l.counter, l.magic, l.flags, l.pair, 0, NULL INTO r;
        RETURN r;

    ELSIF kind = 'd' THEN
        SELECT l.counter - 1, (l.magic - m + 4294967296) % 4294967296, l.flags, l.pair
            INTO c, total, f, pr
            FROM pochta.filedb_live l WHERE l.key = k;
        IF FOUND THEN
            IF c < 0 OR (c = 0 AND total <> 0) THEN
                f := f | 1;  -- DO_NOT_DELETE, for good
            END IF;
            IF c = 0 AND total = 0 AND f & 1 = 0 THEN  -- balanced: to the deletion queue
                DELETE FROM pochta.filedb_live WHERE key = k;
                INSERT INTO pochta.filedb_deleted AS d (key, pair, moved_at) VALUES (k, pr, now)
                    ON CONFLICT (key) DO UPDATE SET pair = pr, moved_at = now;
                RETURN ROW(0, 0, 0, f, pr, 1, now)::pochta.filedb_result;
            END IF;
            UPDATE pochta.filedb_live SET counter = c, magic = total, flags = f WHERE key = k;
            RETURN ROW(0, c, total, f, pr, 0, NULL)::pochta.filedb_result;
        END IF;
        -- dec after delete: a reference the store did not know; back to space0, flagged
        DELETE FROM pochta.filedb_deleted WHERE key = k RETURNING pair INTO pr;
        IF FOUND THEN
            total := (4294967296 - m) % 4294967296;
            INSERT INTO pochta.filedb_live (key, counter, magic, flags, pair)
                VALUES (k, -1, total, 1, pr);
            RETURN ROW(0, -1, total, 1, pr, 0, NULL)::pochta.filedb_result;
        END IF;

    ELSE
        RAISE EXCEPTION 'unknown FileDB step %', kind;
    END IF;

    -- not found: nothing is written, not even the journal entry
    IF op IS NOT NULL THEN
        DELETE FROM pochta.filedb_ops o WHERE o.op = filedb_step.op;
    END IF;
    RETURN ROW(1, NULL, NULL, NULL, NULL, NULL, NULL)::pochta.filedb_result;
END
$$;

-- Steps of concurrent callers in one transaction (group commit): step i of the arrays,
-- in the order given, each as pochta.filedb_step; one row per step, i from 1.
CREATE FUNCTION pochta.filedb_steps(
    kinds "char"[], ks bytea[], lks bigint[], ms bigint[], ps integer[], ops bytea[],
    nows double precision[]
) RETURNS TABLE (i integer, r pochta.filedb_result)
LANGUAGE plpgsql AS $$
BEGIN
    FOR n IN 1 .. coalesce(array_length(ks, 1), 0) LOOP
        i := n;
        r := pochta.filedb_step(kinds[n], ks[n], lks[n], ms[n], ps[n], ops[n], nows[n]);
        RETURN NEXT;
    END LOOP;
END
$$;
