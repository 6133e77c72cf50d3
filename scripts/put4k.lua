-- wrk script: PUT 4 KiB to PUTDIR/t<thread>-<n>.txt, cycling over 100 names per thread,
-- so every PUT replaces a file and the server checks its locks first.
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local n = 0
local content = string.rep("x", 4096)

function request()
  n = (n + 1) % 100
  local path = (os.getenv("PUTDIR") or "/bench/put/") .. "t" .. id .. "-" .. n .. ".txt"
  return wrk.format("PUT", path, nil, content)
end
