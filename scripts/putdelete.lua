-- wrk script: PUT a 4 KiB file, then DELETE it, over and over, each wrk thread on files
-- of its own (DELDIR/t<N>-<n>.bin, a new name each time, so a DELETE never meets a
-- trash item's name twice). Run it with one connection per thread, so a thread's
-- requests are strictly sequential. The next request is chosen when an answer comes
-- (wrk also calls request() once before sending anything).
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local n = 1
local deleting = false
local body = string.rep("k", 4096)

function request()
  local path = (os.getenv("DELDIR") or "/bench/del/") .. "t" .. id .. "-" .. n .. ".bin"
  if deleting then
    return wrk.format("DELETE", path)
  end
  return wrk.format("PUT", path, { ["Content-Type"] = "application/octet-stream" }, body)
end

function response(status, headers, body)
  if deleting then
    n = n + 1
  end
  deleting = not deleting
end
