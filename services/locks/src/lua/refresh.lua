-- Extends a lock's timeout.
-- ARGV: prefix, token, path the request was made on, timeout ms.
-- Reply: {{'refreshed'}, lock}, {{'missing'}} or {{'elsewhere'}}.
local token, path, timeout = ARGV[2], ARGV[3], ARGV[4]
local lock, refusal = covering(token, path)
if not lock then
  return refusal
end
redis.call('PEXPIRE', P .. 'lock:' .. token, timeout)
redis.call('ZADD', P .. 'expiry', at_ms(tonumber(timeout)), token .. ' ' .. lock[2])
lock[7] = timeout
return {{'refreshed'}, lock}
