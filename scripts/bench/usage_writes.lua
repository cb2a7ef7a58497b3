-- wrk script of scripts/bench-usage: usage records through the service API.
--
--   wrk -t T -c C -d D --latency -s usage_writes.lua URL -- USERS TOKEN MODE RUN [DELAY_MS]
--
-- MODE "events" sends `POST /v1/users/USER/usage/api_calls/events`, "consume" sends
-- `POST …/consume`, "-" sends `GET /healthz` (the HTTP ceiling: same connections, no
-- authentication, no ledger write). Each record has quantity 1 and an idempotency key unique to
-- RUN, the thread and its request count, for a user picked uniformly from user_0 …
-- user_(USERS-1). DELAY_MS is read by usage_paced.lua, which adds a wait before each request
-- (wrk looks for delay() before init runs, so the unpaced runs must not define it).
-- done() prints one BENCH_RESULT line of KEY=VALUE fields.

local threads = {}

function setup(thread)
    thread:set("thread_index", #threads)
    table.insert(threads, thread)
end

local users, headers, mode, run
local sent = 0

function init(args)
    users = tonumber(args[1])
    assert(users and users > 0 and args[2] and args[3] and args[4], "usage: -- USERS TOKEN MODE RUN [DELAY_MS]")
    headers = { ["Authorization"] = "Bearer " .. args[2], ["Content-Type"] = "application/json" }
    mode = args[3]
    run = args[4]
    pause_ms = tonumber(args[5] or "0")  -- global: usage_paced.lua's delay() returns it
    math.randomseed(os.time() * 1000 + (thread_index or 0) * 7919)
    responses = 0  -- globals: done() reads them through thread:get
    non2xx = 0
    statuses = {}
end

function request()
    if mode == "-" then
        return wrk.format("GET", "/healthz")
    end
    sent = sent + 1
    local body = string.format('{"quantity": 1, "idempotency_key": "%s-%d-%d"}', run, thread_index or 0, sent)
    local path = "/v1/users/user_" .. math.random(0, users - 1) .. "/usage/api_calls/" .. mode
    return wrk.format("POST", path, headers, body)
end

function response(status, _, _)
    responses = responses + 1
    if status ~= 200 then
        non2xx = non2xx + 1
        statuses[tostring(status)] = (statuses[tostring(status)] or 0) + 1
    end
end

function done(summary, latency, _)
    local responses_total, non2xx_total = 0, 0
    local statuses_total = {}
    for _, thread in ipairs(threads) do
        responses_total = responses_total + thread:get("responses")
        non2xx_total = non2xx_total + thread:get("non2xx")
        for status, count in pairs(thread:get("statuses")) do
            statuses_total[status] = (statuses_total[status] or 0) + count
        end
    end
    local status_list = {}
    for status, count in pairs(statuses_total) do status_list[#status_list + 1] = status .. ":" .. count end
    local e = summary.errors
    io.write(string.format(
        "BENCH_RESULT responses=%d non2xx=%d statuses=%s duration_us=%d " ..
        "p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d " ..
        "err_connect=%d err_read=%d err_write=%d err_timeout=%d\n",
        responses_total, non2xx_total, (#status_list > 0 and table.concat(status_list, ",") or "-"),
        summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
        latency.max, e.connect, e.read, e.write, e.timeout))
end
