-- GET /api/v1/sync/pull?cursor=C (default limit 500) from a random stored cursor whose page is
-- 500 todos (collected by bench.py during the first full pulls).
local C = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local cursors, users_by_id
setup = C.setup
function init(args)
  C.init_random()
  users_by_id = {}
  for _, user in ipairs(C.load_users()) do users_by_id[user.id] = C.headers(user) end
  cursors = C.load_cursors()
end
function request()
  local c = cursors[math.random(#cursors)]
  local path = "/api/v1/sync/pull"
  if c.cursor ~= "" then path = path .. "?cursor=" .. c.cursor end
  return wrk.format("GET", path, users_by_id[c.user])
end
function done(summary, latency, requests) C.done(summary, latency, requests) end
