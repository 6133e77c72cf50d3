-- Drops every lock rooted at or below a path (after a DELETE or a MOVE).
-- ARGV: prefix, path. Reply: {{count of live locks dropped}}.
local roots = roots_below(ARGV[2])
roots[#roots + 1] = ARGV[2]
local released = 0
for _, root in ipairs(roots) do
  for _, token in ipairs(redis.call('SMEMBERS', P .. 'root:' .. root)) do
    local principal = redis.call('HGET', P .. 'lock:' .. token, 'principal')
    if principal then
      redis.call('ZREM', held_key(principal), token)
    end
    released = released + redis.call('DEL', P .. 'lock:' .. token)
    redis.call('ZREM', P .. 'expiry', token .. ' ' .. root)
  end
  redis.call('DEL', P .. 'root:' .. root)
  redis.call('ZREM', P .. 'roots', root)
end
return {{tostring(released)}}
