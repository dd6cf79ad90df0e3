-- Shared by every wrk script of the benchmark (loaded with dofile in each wrk thread and in the
-- main state). Configuration comes from environment variables set by bench/bench.py:
--   BENCH_WRK_OUT        file the JSON summary is written to (done())
--   BENCH_TOKENS_FILE    "userId token" per line
--   BENCH_CURSORS_FILE   "userId<TAB>cursor" per line (empty cursor = first page)
--   BENCH_START_DATE, BENCH_DAYS, BENCH_TODOS, BENCH_GZIP, BENCH_MIXED_PUSH_OPS

local M = {}

function M.env(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then return default end
  return v
end

function M.read_lines(path)
  local lines = {}
  if path == nil then return lines end
  local f = assert(io.open(path, "r"), "cannot open " .. path)
  for line in f:lines() do
    if line ~= "" then lines[#lines + 1] = line end
  end
  f:close()
  return lines
end

-- Users with their tokens: { {id=, token=, auth=}, ... }
function M.load_users()
  local users = {}
  for _, line in ipairs(M.read_lines(M.env("BENCH_TOKENS_FILE"))) do
    local id, token = line:match("^(%d+)%s+(%S+)$")
    if id then users[#users + 1] = { id = tonumber(id), token = token, auth = "Bearer " .. token } end
  end
  assert(#users > 0, "no users in BENCH_TOKENS_FILE")
  return users
end

-- Cursors: { {user=, cursor=}, ... }
function M.load_cursors()
  local cursors = {}
  for _, line in ipairs(M.read_lines(M.env("BENCH_CURSORS_FILE"))) do
    local id, cursor = line:match("^(%d+)\t(.*)$")
    if id then cursors[#cursors + 1] = { user = tonumber(id), cursor = cursor } end
  end
  assert(#cursors > 0, "no cursors in BENCH_CURSORS_FILE")
  return cursors
end

-- The seeded dates ("YYYY-MM-DD") and months ("YYYY-MM").
function M.load_dates()
  local y, m, d = M.env("BENCH_START_DATE", "2025-01-01"):match("^(%d+)-(%d+)-(%d+)$")
  local days = tonumber(M.env("BENCH_DAYS", "365"))
  local dates, months, seen = {}, {}, {}
  for i = 0, days - 1 do
    local t = os.time({ year = tonumber(y), month = tonumber(m), day = tonumber(d) + i, hour = 12 })
    local date = os.date("%Y-%m-%d", t)
    dates[#dates + 1] = date
    local month = date:sub(1, 7)
    if not seen[month] then seen[month] = true; months[#months + 1] = month end
  end
  return dates, months
end

function M.headers(user)
  local h = { ["Authorization"] = user.auth }
  if M.env("BENCH_GZIP", "0") == "1" then h["Accept-Encoding"] = "gzip" end
  return h
end

-- Per-thread random seed and unique ids: setup() numbers the threads.
M.threads = {}
local thread_count = 0
function M.setup(thread)
  thread_count = thread_count + 1
  thread:set("tid", thread_count)
  M.threads[#M.threads + 1] = thread
end

local run_tag = nil
local uuid_counter = 0
function M.init_random()
  local t = tonumber(tid or 0) -- luacheck: ignore (global set by setup)
  math.randomseed(os.time() * 1000 + t * 7919)
  for _ = 1, 10 do math.random() end
  run_tag = string.format("%08x", math.random(0, 0x7fffffff))
end

-- A UUID unique within this run: run tag, thread number, counter.
function M.uuid()
  uuid_counter = uuid_counter + 1
  local t = tonumber(tid or 0)
  return string.format("%s-%04x-4%03x-8%03x-%012x", run_tag, t % 0x10000, math.random(0, 0xfff),
    math.random(0, 0xfff), uuid_counter)
end

local function json_escape(s)
  return (s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end))
end

-- Writes the summary (and extra per-thread counters named in `counters`) to BENCH_WRK_OUT.
function M.done(summary, latency, requests, counters)
  local out = M.env("BENCH_WRK_OUT")
  local parts = {
    string.format('"durationUs": %d', summary.duration),
    string.format('"requests": %d', summary.requests),
    string.format('"bytes": %d', summary.bytes),
    string.format('"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}',
      summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status,
      summary.errors.timeout),
    string.format('"latencyUs": {"min": %d, "mean": %.1f, "stdev": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, "p999": %d}',
      latency.min, latency.mean, latency.stdev, latency.max, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency:percentile(99.9)),
  }
  if counters then
    local totals = {}
    for _, name in ipairs(counters) do totals[name] = 0 end
    for _, thread in ipairs(M.threads) do
      for _, name in ipairs(counters) do totals[name] = totals[name] + (tonumber(thread:get(name)) or 0) end
    end
    local items = {}
    for _, name in ipairs(counters) do items[#items + 1] = string.format('"%s": %d', json_escape(name), totals[name]) end
    parts[#parts + 1] = '"counters": {' .. table.concat(items, ", ") .. "}"
  end
  local text = "{" .. table.concat(parts, ", ") .. "}\n"
  if out then
    local f = assert(io.open(out, "w"))
    f:write(text)
    f:close()
  else
    io.write(text)
  end
end

return M
