-- FileDB (seed 004): space0, space1 and the journal of exactly-once counts.
--
-- Every step is one call of pochta.filedb_steps: one step alone, or the steps of concurrent
-- callers together (group commit), in one transaction with one commit. Each step is atomic:
--   inc     one UPDATE of the live row (its row lock orders it with every other step);
--   upsert  one INSERT ... ON CONFLICT DO UPDATE;
--   dec     reads the live row FOR UPDATE, then updates it, or moves it to space1, or (dec
--           after delete) brings a space1 record back to space0.
-- upsert and dec first take a transaction-scoped advisory lock on the key (its first 8
-- bytes, computed by the caller), so that a dec bringing a record back and an upsert
-- inserting one never race; a step with an operation id journals it in the same
-- transaction (a journaled id is a replay: nothing changes). Callers order the steps of a
-- group by that lock number, so two groups take their locks in one order and never deadlock.

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

-- kinds[n]  'i' inc, 'u' upsert (after an upload, on pair ps[n]), 'd' dec (moved_at nows[n])
-- ks[n]     the 32-byte key;  lks[n] its advisory lock number;  ms[n] the magic, 1..2^32-1
-- ops[n]    the operation id, or NULL
-- One row per step, in order: o_status 0 done (or replayed), 1 not found (nothing written);
-- o_space 0 live, 1 space1 (then counter and magic are 0 and o_moved_at is set).
CREATE FUNCTION pochta.filedb_steps(
    kinds "char"[], ks bytea[], lks bigint[], ms bigint[], ps integer[], ops bytea[],
    nows double precision[]
) RETURNS TABLE (
    o_status smallint, o_counter bigint, o_magic bigint, o_flags integer, o_pair integer,
    o_space smallint, o_moved_at double precision
)
LANGUAGE plpgsql AS $$
DECLARE
    k bytea;
    m bigint;
    c bigint;
    total bigint;
    f integer;
    pr integer;
BEGIN
    FOR n IN 1 .. coalesce(array_length(ks, 1), 0) LOOP
        k := ks[n];
        m := ms[n];
        o_status := 0;
        o_space := 0;
        o_moved_at := NULL;
        IF kinds[n] <> 'i' THEN
            PERFORM pg_advisory_xact_lock(lks[n]);
        END IF;

        IF ops[n] IS NOT NULL THEN
            INSERT INTO pochta.filedb_ops (op) VALUES (ops[n]) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN  -- journaled already: a replay; the record as it is
                SELECT l.counter, l.magic, l.flags, l.pair
                    INTO o_counter, o_magic, o_flags, o_pair
                    FROM pochta.filedb_live l WHERE l.key = k;
                IF NOT FOUND THEN
                    SELECT 0, 0, 0, d.pair, 1, d.moved_at
                        INTO o_counter, o_magic, o_flags, o_pair, o_space, o_moved_at
                        FROM pochta.filedb_deleted d WHERE d.key = k;
                    IF NOT FOUND THEN
                        o_status := 1;
                    END IF;
                END IF;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;

        IF kinds[n] = 'i' THEN
            UPDATE pochta.filedb_live l
                SET counter = l.counter + 1, magic = (l.magic + m) % 4294967296
                WHERE l.key = k
                RETURNING l.counter, l.magic, l.flags, l.pair
                INTO o_counter, o_magic, o_flags, o_pair;
            IF FOUND THEN
                RETURN NEXT;
                CONTINUE;
            END IF;

        ELSIF kinds[n] = 'u' THEN
            INSERT INTO pochta.filedb_live AS l (key, counter, magic, flags, pair)
                VALUES (k, 1, m, 0, ps[n])
                ON CONFLICT (key) DO UPDATE
                    SET counter = l.counter + 1, magic = (l.magic + m) % 4294967296
                RETURNING l.counter, l.magic, l.flags, l.pair
                INTO o_counter, o_magic, o_flags, o_pair;
            RETURN NEXT;
            CONTINUE;

        ELSIF kinds[n] = 'd' THEN
            SELECT l.counter - 1, (l.magic - m + 4294967296) % 4294967296, l.flags, l.pair
                INTO c, total, f, pr
                FROM pochta.filedb_live l WHERE l.key = k FOR UPDATE;
            IF FOUND THEN
                IF c < 0 OR (c = 0 AND total <> 0) THEN
                    f := f | 1;  -- DO_NOT_DELETE, for good
                END IF;
                IF c = 0 AND total = 0 AND f & 1 = 0 THEN  -- balanced: to the deletion queue
                    DELETE FROM pochta.filedb_live l WHERE l.key = k;
                    INSERT INTO pochta.filedb_deleted AS d (key, pair, moved_at)
                        VALUES (k, pr, nows[n])
                        ON CONFLICT (key) DO UPDATE SET pair = pr, moved_at = nows[n];
                    o_counter := 0; o_magic := 0; o_flags := f; o_pair := pr;
                    o_space := 1; o_moved_at := nows[n];
                ELSE
                    UPDATE pochta.filedb_live l SET counter = c, magic = total, flags = f
                        WHERE l.key = k;
                    o_counter := c; o_magic := total; o_flags := f; o_pair := pr;
                END IF;
                RETURN NEXT;
                CONTINUE;
            END IF;
            -- dec after delete: a reference the store did not know; back to space0, flagged
            DELETE FROM pochta.filedb_deleted d WHERE d.key = k RETURNING d.pair INTO pr;
            IF FOUND THEN
                total := (4294967296 - m) % 4294967296;
                INSERT INTO pochta.filedb_live (key, counter, magic, flags, pair)
                    VALUES (k, -1, total, 1, pr);
                o_counter := -1; o_magic := total; o_flags := 1; o_pair := pr;
                RETURN NEXT;
                CONTINUE;
            END IF;

        ELSE
            RAISE EXCEPTION 'unknown FileDB step %', kinds[n];
        END IF;

        -- not found: nothing is written, not even the journal entry
        IF ops[n] IS NOT NULL THEN
            DELETE FROM pochta.filedb_ops o WHERE o.op = ops[n];
        END IF;
        o_status := 1;
        o_counter := NULL; o_magic := NULL; o_flags := NULL; o_pair := NULL;
        RETURN NEXT;
    END LOOP;
END
$$;
