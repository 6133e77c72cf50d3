-- Releases a lock by its token.
-- ARGV: prefix, token, path the request was made on, principal.
-- Reply: {{'unlocked', root}}, {{'missing'}}, {{'elsewhere'}} or {{'forbidden'}}.
local token, path, principal = ARGV[2], ARGV[3], ARGV[4]
local lock, refusal = owned(token, path, principal)
if not lock then
  return refusal
end
redis.call('DEL', P .. 'lock:' .. token)
unindex(token, lock[2])
redis.call('ZREM', held_key(lock[6]), token)
return {{'unlocked', lock[2]}}
