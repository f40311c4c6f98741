-- The full-text GIN indexes keep fastupdate but with a small pending list
-- (256 kB instead of 4 MB). An insert that overflows the pending list merges
-- it inside its own transaction; with 4 MB that merge is a stall of tens of
-- milliseconds inside a group commit. Measured on 2 cores, authorize at
-- concurrency 32 and open loop at 1800/s:
--   4 MB (default):      4705 req/s, p99 39.5 ms, p99.9 87 ms
--   fastupdate off:      3681 req/s, p99 13.2 ms, p99.9 31 ms
--   256 kB (this):       5022 req/s, p99  9.2 ms, p99.9 13 ms
ALTER INDEX decisions_search SET (fastupdate = on, gin_pending_list_limit = 256);
ALTER INDEX audit_events_search SET (fastupdate = on, gin_pending_list_limit = 256);
