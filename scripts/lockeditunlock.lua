-- wrk script: the edit cycle of a WebDAV client (LOCK, PUT with the token in the If
-- header, UNLOCK), over and over, each wrk thread on its own file (LOCKDIR/t<N>.txt,
-- created beforehand). Run it with one connection per thread, so a thread's requests are
-- strictly sequential. Every request counts; cycles/s is requests/s divided by 3.
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local step = 0
local token = nil
local lockinfo = '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>bench</D:owner></D:lockinfo>'
local content = string.rep("edited line of the document\n", 146)  -- 4 KiB

function request()
  local path = (os.getenv("LOCKDIR") or "/bench/lock/") .. "t" .. id .. ".txt"
  if step == 1 and token then
    return wrk.format("PUT", path, { ["If"] = "(" .. token .. ")" }, content)
  elseif step == 2 and token then
    return wrk.format("UNLOCK", path, { ["Lock-Token"] = token })
  end
  step = 0
  return wrk.format("LOCK", path, { ["Depth"] = "0", ["Timeout"] = "Second-60", ["Content-Type"] = "application/xml" }, lockinfo)
end

function response(status, headers, body)
  if step == 0 then
    token = headers["Lock-Token"] or headers["lock-token"]
    step = 1
  elseif step == 1 then
    step = 2
  else
    token = nil
    step = 0
  end
end
