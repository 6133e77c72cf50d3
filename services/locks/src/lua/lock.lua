-- Takes a lock unless one is in the way, atomically.
-- ARGV: prefix, path, scope, depth, token, owner, principal, collection, timeout ms,
-- most locks per principal (0: no limit).
-- Reply: {{'granted'}, lock}, {{'conflict'}, lock, ...} or {{'toomany', count}}.
local path, scope, depth = ARGV[2], ARGV[3], ARGV[4]
sweep()
local found = {}
around(path, depth == '1', found)
local reply = {{'conflict'}}
for _, lock in ipairs(found) do
  local relevant = applies(lock, path) or (depth == '1' and below(lock[2], path))
  if relevant and (scope == '0' or lock[3] == '0') then
    reply[#reply + 1] = lock
  end
end
if #reply > 1 then
  return reply
end
local token, owner, principal, collection = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local timeout, most = ARGV[9], tonumber(ARGV[10])
if most > 0 then
  local count = held_count(principal)
  if count >= most then
    return {{'toomany', tostring(count)}}
  end
end
local key = P .. 'lock:' .. token
redis.call('HSET', key, 'root', path, 'scope', scope, 'depth', depth, 'owner', owner,
  'principal', principal, 'collection', collection)
redis.call('PEXPIRE', key, timeout)
redis.call('SADD', P .. 'root:' .. path, token)
redis.call('ZADD', P .. 'roots', 0, path)
redis.call('ZADD', P .. 'expiry', at_ms(tonumber(timeout)), token .. ' ' .. path)
hold(principal, token, timeout)
return {{'granted'}, {token, path, scope, depth, owner, principal, timeout, collection}}
