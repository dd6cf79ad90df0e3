-- Ceilings: one fixed GET (the URL given to wrk), summary to BENCH_WRK_OUT.
local C = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
setup = C.setup
function done(summary, latency, requests) C.done(summary, latency, requests) end
