"""The deduplicating blob store of seed 004: FileDB, PairDB, disks, the loader and Valkyrie."""
