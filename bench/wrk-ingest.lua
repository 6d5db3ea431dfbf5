-- Single-message ingest for wrk: every request is a PUT of a new id with a
-- 1 KiB JSON payload to route "bench". Start courier with a config that has
-- that route (bench/courier-bench.yaml), then:
--
--   wrk -t2 -c64 -d10s --latency -s bench/wrk-ingest.lua http://127.0.0.1:18425
--
-- wrk is a small C load generator, so nearly all of the machine's CPU goes to
-- courier instead of to the client.

local threads = 0
local payload = '"' .. string.rep("x", 1022) .. '"'
-- deliver_after keeps the engine out of the measurement: this is ingest alone.
local body = '{"type":"bench","route":"bench","deliver_after":"2099-01-01T00:00:00Z","payload":' .. payload .. '}'

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  prefix = "/v1/messages/wrk-" .. tid .. "-" .. os.time() .. "-"
  n = 0
end

function request()
  n = n + 1
  return wrk.format("PUT", prefix .. n, {["Content-Type"] = "application/json"}, body)
end
