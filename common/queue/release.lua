-- Return an unprocessed in-flight batch to *due* at once (a stopping worker's prefetch).
-- KEYS: due, byid, inflight, batches
-- ARGV: batch token
--@include _requeue.lua
return requeue_batch(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1])
