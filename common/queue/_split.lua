-- Fragment: split_blobs(s) cuts a concatenation of blobs by the body size in each header
-- (bytes 37-42, hex; a header is 42 bytes). claim.lua lets only blobs so framed into a batch
-- (it sends the others to *dead*); should a header still be unreadable, it ends the split:
-- the rest becomes one (bad) blob.
local function split_blobs(s)
  local out, pos, len = {}, 1, #s
  while pos <= len do
    local size = tonumber(string.sub(s, pos + 36, pos + 41), 16)
    local stop = size and pos + 41 + size
    if not stop or stop > len then
      out[#out + 1] = string.sub(s, pos)
      break
    end
    out[#out + 1] = string.sub(s, pos, stop)
    pos = stop + 1
  end
  return out
end
