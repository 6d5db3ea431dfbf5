-- Steady single-message ingest for wrk (bench/steady.sh): PUTs of new ids
-- with a 1 KiB payload to route "steady" at a fixed rate, each message
-- carrying the time it was sent (X-Bench-Sent, Unix nanoseconds) in its
-- headers, which courier hands to the receiver with the delivery, so that
-- the receiver measures ingest to delivered. The script's arguments are
-- the rate, in messages per second for all threads together, and the
-- number of threads (wrk's -t):
--
--   wrk -t2 -c256 -d20s -s bench/wrk-steady.lua http://127.0.0.1:18425 -- 10000 2
--
-- Each thread keeps a schedule of its share of the rate: every request
-- takes the next time of it (wrk asks delay() before each request, on
-- whichever connection is free) and is held back until then, so that the
-- rate offered does not follow courier's answers (a slow answer does not
-- lower the load) and requests go out evenly spaced, not in bursts of the
-- connections that came free together. The time a message carries is its
-- time in the schedule, not when it went out: while courier is slow to
-- answer, requests wait for a free connection, and that wait is part of
-- what a sender sees.

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } steady_timespec;
int clock_gettime(int clk_id, steady_timespec *tp);
]]
local ts = ffi.new("steady_timespec")

-- now returns the wall clock in seconds (a float) and as a string of Unix
-- nanoseconds.
local function now()
  ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME, which the receiver compares against
  local sec, nsec = tonumber(ts.tv_sec), tonumber(ts.tv_nsec)
  return sec + nsec / 1e9, string.format("%d%09d", sec, nsec)
end

local threads = 0
local payload = '"' .. string.rep("x", 1022) .. '"'

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  local rate = tonumber(args[1] or "10000")
  local nthreads = tonumber(args[2] or "2")
  interval = nthreads / rate -- seconds between this thread's sends
  local t = now()
  prefix = "/v1/messages/steady-" .. tid .. "-" .. math.floor(t * 1000) .. "-"
  n = 0
  slot = 0
  start = t
end

function delay()
  -- This request's time: the next of the schedule, start + slot * interval.
  slot = slot + 1
  local wait = start + slot * interval - now()
  if wait <= 0 then
    return 0
  end
  return wait * 1000
end

function request()
  -- The n-th request's time is the n-th of the schedule: a request that
  -- goes out late, because every connection was waiting for an answer,
  -- counts its wait, as a client that cannot hold back its messages would.
  n = n + 1
  local sent = string.format("%.0f", (start + n * interval) * 1e9)
  local body = '{"type":"steady","route":"steady","headers":{"X-Bench-Sent":"' .. sent .. '"},"payload":' .. payload .. '}'
  return wrk.format("PUT", prefix .. n, {["Content-Type"] = "application/json"}, body)
end

function done(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("steady: %d requests, %d errors, %.0f/s\n", summary.requests, errors, summary.requests / (summary.duration / 1e6)))
end
