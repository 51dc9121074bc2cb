-- wrk script for the "overload" release gate: POSTs a completion and counts the answers per
-- status code, and how many of them carried a Retry-After header.
--   BODY='{"prompt":"Hi","max_tokens":16}' wrk -t2 -c60 -d20s --timeout 10s \
--     -s scripts/gates/overload.lua http://127.0.0.1:8000/v1/completions
-- done() prints lines the gate parses:
--   status CODE COUNT retry_after COUNT
--   errors connect N read N write N timeout N status N
--   total requests N duration_us N
wrk.method = "POST"
wrk.body = os.getenv("BODY")
wrk.headers["Content-Type"] = "application/json"

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

-- Per wrk thread (each has its own Lua state): status -> count, status -> count with Retry-After.
counts = {}
with_retry_after = {}

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  for name, _ in pairs(headers) do
    if string.lower(name) == "retry-after" then
      with_retry_after[status] = (with_retry_after[status] or 0) + 1
      break
    end
  end
end

function done(summary, latency, requests)
  local total, ra = {}, {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do total[status] = (total[status] or 0) + n end
    for status, n in pairs(thread:get("with_retry_after")) do ra[status] = (ra[status] or 0) + n end
  end
  for status, n in pairs(total) do
    io.write(string.format("status %d %d retry_after %d\n", status, n, ra[status] or 0))
  end
  local e = summary.errors
  io.write(string.format("errors connect %d read %d write %d timeout %d status %d\n",
                         e.connect, e.read, e.write, e.timeout, e.status))
  io.write(string.format("total requests %d duration_us %d\n", summary.requests, summary.duration))
end
