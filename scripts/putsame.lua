-- wrk script: PUT 4 KiB over the same file again and again, each wrk thread over a file
-- of its own (PUTDIR/t<N>.bin): with versions kept, every PUT but the first keeps one.
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local body = string.rep("v", 4096)

function request()
  local dir = os.getenv("PUTDIR") or "/bench/put/"
  return wrk.format("PUT", dir .. "t" .. id .. ".bin", { ["Content-Type"] = "application/octet-stream" }, body)
end
