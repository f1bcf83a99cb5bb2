"""The state on disk: directory and snapshots, segments, compaction, integrity, durability."""
