-- Extends a lock's timeout.
-- ARGV: prefix, token, path the request was made on, timeout ms, principal.
-- Reply: {{'refreshed'}, lock}, {{'missing'}}, {{'elsewhere'}} or {{'forbidden'}}.
local token, path, timeout, principal = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lock, refusal = owned(token, path, principal)
if not lock then
  return refusal
end
hold(lock[6], token, timeout)
redis.call('PEXPIRE', P .. 'lock:' .. token, timeout)
redis.call('ZADD', P .. 'expiry', at_ms(tonumber(timeout)), token .. ' ' .. lock[2])
lock[7] = timeout
return {{'refreshed'}, lock}
