-- Ceilings 2 and 3: one fixed GET (the URL given to wrk) with a random user's bearer token (and
-- Accept-Encoding: gzip in the gzip variant), summary to BENCH_WRK_OUT. /__bench/db checks the
-- token; /__bench/page ignores it.
local C = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local headers
setup = C.setup
function init(args)
  C.init_random()
  headers = {}
  for i, user in ipairs(C.load_users()) do headers[i] = C.headers(user) end
end
function request()
  return wrk.format("GET", nil, headers[math.random(#headers)])
end
function done(summary, latency, requests) C.done(summary, latency, requests) end
