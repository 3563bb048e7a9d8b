-- wrk script for every HTTP/1.1 scenario.
-- Arguments after "--": METHOD [BODY_SIZE]. The body is the same pattern the apps
-- use (benchmarks/apps/payload.py), so an echo run moves exactly the bytes we checked.
-- done() prints one JSON line prefixed with "BENCH_JSON " for the harness to parse;
-- no response() hook is defined because it would make wrk parse every response in Lua
-- and cap the throughput we can measure.

local alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

local function pattern(size)
  local reps = math.floor(size / #alphabet) + 1
  return string.sub(string.rep(alphabet, reps), 1, size)
end

function init(args)
  local method = args[1] or "GET"
  wrk.method = method
  if method == "POST" then
    local size = tonumber(args[2] or "0")
    wrk.body = pattern(size)
    wrk.headers["Content-Type"] = "application/octet-stream"
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"max":%d,"mean":%.2f,"stdev":%.2f,"p50":%d,"p90":%d,"p99":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev,
    latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
