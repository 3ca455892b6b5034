-- Fragment: find_pending(due_key, byid_key, id) is the blob of a pending event, or nil.
-- Durable events are indexed by id; an in-memory event is looked for with ZSCAN (O(size)).
local function find_pending(due_key, byid_key, id)
  local b = redis.call('HGET', byid_key, id)
  if b then
    if redis.call('ZSCORE', due_key, b) then return b end
    return nil
  end
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', due_key, cursor, 'MATCH', '??????' .. id .. '*', 'COUNT', 1000)
    cursor = page[1]
    if #page[2] > 0 then return page[2][1] end
  until cursor == '0'
  return nil
end
