-- GET /api/v1/todos?date=D for a random user and a random seeded date.
local C = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local users, dates, headers
setup = C.setup
function init(args)
  C.init_random()
  users = C.load_users()
  dates = C.load_dates()
  headers = {}
  for i, user in ipairs(users) do headers[i] = C.headers(user) end
end
function request()
  local i = math.random(#users)
  return wrk.format("GET", "/api/v1/todos?date=" .. dates[math.random(#dates)], headers[i])
end
function done(summary, latency, requests) C.done(summary, latency, requests) end
