-- The live locks rooted at some paths or their ancestors and, for recursive paths,
-- below them; each once.
-- ARGV: prefix, then pairs of a path and '1' (recursive) or '0'.
-- Reply: {lock, ...}.
local found, seen, reply = {}, {}, {}
for i = 2, #ARGV, 2 do
  around(ARGV[i], ARGV[i + 1] == '1', found)
end
for _, lock in ipairs(found) do
  if not seen[lock[1]] then
    seen[lock[1]] = true
    reply[#reply + 1] = lock
  end
end
return reply
