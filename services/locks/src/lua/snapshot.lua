-- The live locks rooted at some paths or their ancestors and, for recursive paths,
-- below them; each once. And, when asked, the free root of a tree: the highest of it and
-- its ancestors at or below which no lock is rooted (an expired lock whose root is still
-- indexed counts, which errs on the side of a lock).
-- ARGV: prefix, '1' and the tree (or '0' and ''), then pairs of a path and '1'
-- (recursive) or '0'.
-- Reply: {{free root} or {}, lock, ...}.
local found, seen, reply = {}, {}, {{}}
for i = 4, #ARGV, 2 do
  around(ARGV[i], ARGV[i + 1] == '1', found)
end
for _, lock in ipairs(found) do
  if not seen[lock[1]] then
    seen[lock[1]] = true
    reply[#reply + 1] = lock
  end
end

-- Whether a lock is rooted at `tree` or below it.
local function rooted_within(tree)
  if tree == '' then
    return redis.call('ZCARD', P .. 'roots') > 0
  end
  if redis.call('ZSCORE', P .. 'roots', tree) then
    return true
  end
  return #redis.call('ZRANGEBYLEX', P .. 'roots', '[' .. tree .. '/', '(' .. tree .. '0', 'LIMIT', 0, 1) > 0
end

if ARGV[2] == '1' then
  for _, tree in ipairs(ancestors_and_self(ARGV[3])) do
    if not rooted_within(tree) then
      reply[1] = {tree}
      break
    end
  end
end
return reply
