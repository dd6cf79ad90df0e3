-- GET /api/v1/daily-stats?month=M for a random user and a random seeded month.
local C = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local users, months, headers
setup = C.setup
function init(args)
  C.init_random()
  users = C.load_users()
  local _
  _, months = C.load_dates()
  headers = {}
  for i, user in ipairs(users) do headers[i] = C.headers(user) end
end
function request()
  local i = math.random(#users)
  return wrk.format("GET", "/api/v1/daily-stats?month=" .. months[math.random(#months)], headers[i])
end
function done(summary, latency, requests) C.done(summary, latency, requests) end
