-- Forget a finished in-flight batch: its events are done (their blobs live only in the batch).
-- KEYS: inflight, batches
-- ARGV: batch token
-- Returns 1, or 0 when the batch had expired and its events went back to *due* (they will run
-- again, which the DB record makes harmless for durable events).
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
