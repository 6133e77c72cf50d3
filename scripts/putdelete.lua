-- wrk script: PUT a 4 KiB file, then DELETE it, over and over, each wrk thread on files
-- of its own (DELDIR/t<N>-<n>.bin, a new name each time, so a DELETE never meets a
-- trash item's name twice). Run it with one connection per thread, so a thread's
-- requests are strictly sequential: a DELETE always finds the file its PUT made.
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local n = 0
local pending = nil
local body = string.rep("k", 4096)

function request()
  local dir = os.getenv("DELDIR") or "/bench/del/"
  if pending then
    local path = pending
    pending = nil
    return wrk.format("DELETE", path)
  end
  n = n + 1
  pending = dir .. "t" .. id .. "-" .. n .. ".bin"
  return wrk.format("PUT", pending, { ["Content-Type"] = "application/octet-stream" }, body)
end
