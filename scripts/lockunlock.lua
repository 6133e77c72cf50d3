-- wrk script: LOCK (exclusive, depth 0) then UNLOCK with the token just granted, over and
-- over, each wrk thread on its own file (LOCKDIR/t<N>.txt, created beforehand). Run it
-- with one connection per thread, so a thread's requests are strictly sequential.
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local token = nil
local body = '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>bench</D:owner></D:lockinfo>'

function request()
  local path = (os.getenv("LOCKDIR") or "/bench/lock/") .. "t" .. id .. ".txt"
  if token then
    local t = token
    token = nil
    return wrk.format("UNLOCK", path, { ["Lock-Token"] = t })
  end
  return wrk.format("LOCK", path, { ["Depth"] = "0", ["Timeout"] = "Second-60", ["Content-Type"] = "application/xml" }, body)
end

function response(status, headers, body)
  token = headers["Lock-Token"] or headers["lock-token"]
end
