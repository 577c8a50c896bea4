-- FileDB's place in a sharded installation (postgres.filedb_shards, blobs/filedb/sharded.py):
-- which of how many shards this database is. Written at the first start with shards and read
-- at every start after: the list's number and order fix where each record lives, so a start
-- with the list changed (a shard added, removed or moved, one database named twice) is
-- refused rather than looking for records on the wrong shard.
CREATE TABLE pochta.filedb_shard (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    shard integer NOT NULL CHECK (shard >= 0),
    shards integer NOT NULL CHECK (shards > shard)
);
