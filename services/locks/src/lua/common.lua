-- Shared by every lock script (prepended to each). ARGV[1] is the key prefix P.
--
-- The data:
--   P..'lock:'..token   hash (root, scope, depth, owner, principal, collection) that
--                       expires by itself with the lock's timeout (PEXPIRE)
--   P..'root:'..path    set of the tokens of the locks rooted at path
--   P..'roots'          sorted set of the paths with a lock, all at score 0, so that
--                       ZRANGEBYLEX finds the roots below a collection without a scan
--   P..'expiry'         sorted set of 'token root' by expiry time (Redis's clock), so
--                       that expired locks leave the indexes too
--   P..'held:'..user    sorted set of the tokens of a user's locks by expiry time, to
--                       count them (--max-locks-per-principal); it expires with the
--                       longest of them
-- A lock travels in replies as the list
--   {token, root, scope, depth, owner, principal, milliseconds left, collection}
-- with scope 0 exclusive / 1 shared and depth 0 / 1 infinity, as in locks.proto.
local P = ARGV[1]

-- Redis's clock in milliseconds plus `offset` ms, as an integer string.
local function at_ms(offset)
  local t = redis.call('TIME')
  return string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + offset)
end

-- Removes a token from the indexes.
local function unindex(token, root)
  local set = P .. 'root:' .. root
  redis.call('SREM', set, token)
  if redis.call('SCARD', set) == 0 then
    redis.call('ZREM', P .. 'roots', root)
  end
  redis.call('ZREM', P .. 'expiry', token .. ' ' .. root)
end

-- The live lock with this token, as a reply list, or nil.
local function load(token)
  local key = P .. 'lock:' .. token
  local left = redis.call('PTTL', key)
  if left <= 0 then
    return nil
  end
  local f = redis.call('HMGET', key, 'root', 'scope', 'depth', 'owner', 'principal', 'collection')
  return {token, f[1], f[2], f[3], f[4], f[5], tostring(left), f[6]}
end

-- Appends the live locks rooted at `root` to `out`; dead tokens leave the index.
local function rooted(root, out)
  for _, token in ipairs(redis.call('SMEMBERS', P .. 'root:' .. root)) do
    local lock = load(token)
    if lock then
      out[#out + 1] = lock
    else
      unindex(token, root)
    end
  end
end

-- The root paths strictly below `path`.
local function roots_below(path)
  if path == '' then
    return redis.call('ZRANGEBYLEX', P .. 'roots', '(', '+')
  end
  return redis.call('ZRANGEBYLEX', P .. 'roots', '[' .. path .. '/', '(' .. path .. '0')
end

-- `path` and its ancestors, the root ('') first.
local function ancestors_and_self(path)
  local out = {''}
  local from = 1
  while true do
    local slash = string.find(path, '/', from, true)
    if not slash then
      break
    end
    out[#out + 1] = string.sub(path, 1, slash - 1)
    from = slash + 1
  end
  if path ~= '' then
    out[#out + 1] = path
  end
  return out
end

-- Appends the locks rooted at `path` or an ancestor (and, when `recursive`, below it).
local function around(path, recursive, out)
  for _, ancestor in ipairs(ancestors_and_self(path)) do
    rooted(ancestor, out)
  end
  if recursive then
    for _, root in ipairs(roots_below(path)) do
      rooted(root, out)
    end
  end
end

-- Whether `path` lies strictly below `root`.
local function below(path, root)
  if root == '' then
    return path ~= ''
  end
  return #path > #root and string.sub(path, 1, #root + 1) == root .. '/'
end

-- Whether a lock (reply list) applies to `path`.
local function applies(lock, path)
  return lock[2] == path or (lock[4] == '1' and below(path, lock[2]))
end

-- The live lock `token` when it covers `path` and belongs to `principal` (or to no
-- one: taken without authentication); otherwise nil and the refusal to reply. Only the
-- owner may refresh or release a lock.
local function owned(token, path, principal)
  local lock = load(token)
  if not lock then
    return nil, {{'missing'}}
  end
  if not applies(lock, path) then
    return nil, {{'elsewhere'}}
  end
  if lock[6] ~= '' and lock[6] ~= principal then
    return nil, {{'forbidden'}}
  end
  return lock
end

-- Takes up to 100 expired locks out of the indexes.
local function sweep()
  local expired = redis.call('ZRANGEBYSCORE', P .. 'expiry', '-inf', at_ms(0), 'LIMIT', 0, 100)
  for _, member in ipairs(expired) do
    local space = string.find(member, ' ', 1, true)
    local token = string.sub(member, 1, space - 1)
    if redis.call('PTTL', P .. 'lock:' .. token) <= 0 then
      unindex(token, string.sub(member, space + 1))
    end
  end
end


-- The key of the set of `principal`'s locks.
local function held_key(principal)
  return P .. 'held:' .. principal
end

-- Counts `token` among `principal`'s locks until `timeout` ms from now.
local function hold(principal, token, timeout)
  local key = held_key(principal)
  redis.call('ZADD', key, at_ms(tonumber(timeout)), token)
  if redis.call('PTTL', key) < tonumber(timeout) then
    redis.call('PEXPIRE', key, timeout)
  end
end

-- How many live locks `principal` holds.
local function held_count(principal)
  local key = held_key(principal)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', at_ms(0))
  return redis.call('ZCARD', key)
end
