-- Batch ingest for wrk: every request is a POST of 1,000 messages with 1 KiB
-- JSON payloads and no ids (courier assigns each a new UUIDv7), so the same
-- body makes new messages every time. With bench/courier-bench.yaml:
--
--   wrk -t2 -c4 -d10s --latency -s bench/wrk-batch.lua http://127.0.0.1:18425
--
-- Messages per second = requests per second x 1,000.

local payload = '"' .. string.rep("x", 1022) .. '"'
local item = '{"type":"bench","route":"bench","deliver_after":"2099-01-01T00:00:00Z","payload":' .. payload .. '}'
local items = {}
for i = 1, 1000 do items[i] = item end
wrk.method = "POST"
wrk.path = "/v1/messages/batch"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"messages":[' .. table.concat(items, ",") .. ']}'
