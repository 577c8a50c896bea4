-- IMAP: UIDs per folder that are never given twice, UIDVALIDITY, and the flags that have no
-- column of their own (\Answered, \Deleted, \Draft: pochta.types.LetterFlag). The letters a
-- folder holds already get UIDs 1, 2, ... in the order they arrived.
ALTER TABLE pochta.folders
    ADD COLUMN uidvalidity bigint NOT NULL DEFAULT (greatest(1, extract(epoch FROM now())::bigint % 4294967296)),
    ADD COLUMN uidnext bigint NOT NULL DEFAULT 1;
ALTER TABLE pochta.letters
    ADD COLUMN uid bigint NOT NULL DEFAULT 0,
    ADD COLUMN flags integer NOT NULL DEFAULT 0;
UPDATE pochta.letters SET uid = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY folder_id ORDER BY id) AS n
      FROM pochta.letters) AS r
WHERE pochta.letters.id = r.id;
UPDATE pochta.folders f SET uidnext = 1 + coalesce(
    (SELECT max(uid) FROM pochta.letters l WHERE l.folder_id = f.id), 0);
CREATE INDEX letters_by_uid ON pochta.letters (folder_id, uid);
