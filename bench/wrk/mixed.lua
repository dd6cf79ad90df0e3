-- Mixed load: 80% REST reads, 15% pulls, 5% pushes (random users).
--   reads:  40% todos by date, 20% daily stats by month, 10% tag list, 10% one todo by id
--   pulls:  a page from a random stored cursor (any page of a first pull, or the end cursor)
--   pushes: BENCH_MIXED_PUSH_OPS operations, half creates, half updates of existing todos
local C = dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local users, dates, months, cursors, headers, users_by_id, push_headers
local todos_per_user = tonumber(C.env("BENCH_TODOS", "5000"))
local user_count = tonumber(C.env("BENCH_USERS", "200"))
local interleaved = C.env("BENCH_SEED_LAYOUT", "interleaved") == "interleaved"
local push_ops = tonumber(C.env("BENCH_MIXED_PUSH_OPS", "10"))
n_read, n_pull, n_push, n_push_ops = 0, 0, 0, 0
setup = C.setup
function init(args)
  C.init_random()
  users = C.load_users()
  dates, months = C.load_dates()
  cursors = C.load_cursors()
  headers, users_by_id, push_headers = {}, {}, {}
  for i, user in ipairs(users) do
    headers[i] = C.headers(user)
    users_by_id[user.id] = headers[i]
    local h = C.headers(user)
    h["Content-Type"] = "application/json"
    push_headers[i] = h
  end
end

local function push_body(user)
  local ops = {}
  for k = 1, push_ops do
    local op
    if k % 2 == 1 then
      op = string.format('{"opId":"%s","entity":"todo","action":"create","clientId":"%s","data":{"title":"Mixed load item %d","deadline":"%s","difficulty":%d,"estimatedTime":%d,"isLife":%s}}',
        C.uuid(), C.uuid(), k, dates[math.random(#dates)], math.random(0, 5), 15 * math.random(0, 8),
        math.random(2) == 1 and "true" or "false")
    else
      local id = (user.id - 1) * todos_per_user + math.random(todos_per_user)
      op = string.format('{"opId":"%s","entity":"todo","action":"update","id":%d,"data":{"isCompleted":%s,"title":"Edited under mixed load %d"}}',
        C.uuid(), id, math.random(2) == 1 and "true" or "false", math.random(1000000))
    end
    ops[#ops + 1] = op
  end
  return string.format('{"deviceId":"%s","conflictPolicy":"merge","operations":[%s]}', C.uuid(), table.concat(ops, ","))
end

function request()
  local r = math.random(100)
  if r <= 80 then
    n_read = n_read + 1
    local i = math.random(#users)
    if r <= 40 then
      return wrk.format("GET", "/api/v1/todos?date=" .. dates[math.random(#dates)], headers[i])
    elseif r <= 60 then
      return wrk.format("GET", "/api/v1/daily-stats?month=" .. months[math.random(#months)], headers[i])
    elseif r <= 70 then
      return wrk.format("GET", "/api/v1/tags", headers[i])
    else
      local k = math.random(todos_per_user)
      local id = interleaved and (k - 1) * user_count + users[i].id or (users[i].id - 1) * todos_per_user + k
      return wrk.format("GET", "/api/v1/todos/" .. id, headers[i])
    end
  elseif r <= 95 then
    n_pull = n_pull + 1
    local c = cursors[math.random(#cursors)]
    local path = "/api/v1/sync/pull"
    if c.cursor ~= "" then path = path .. "?cursor=" .. c.cursor end
    return wrk.format("GET", path, users_by_id[c.user])
  else
    n_push = n_push + 1
    n_push_ops = n_push_ops + push_ops
    local i = math.random(#users)
    return wrk.format("POST", "/api/v1/sync/push", push_headers[i], push_body(users[i]))
  end
end

function done(summary, latency, requests)
  C.done(summary, latency, requests, { "n_read", "n_pull", "n_push", "n_push_ops" })
end
