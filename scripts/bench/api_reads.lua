-- wrk script of scripts/bench-api: status and entitlement reads of random users.
--
--   wrk -t T -c C -d D --latency -s api_reads.lua URL -- USERS TOKEN [PATHS]
--
-- Each request picks a user uniformly from user_0 … user_(USERS-1) and, in turn, one of PATHS
-- (comma-separated, default "subscription,entitlements"), and sends
-- `GET /v1/users/USER/PATH` with `Authorization: Bearer TOKEN`. PATHS "-" sends `GET /healthz`
-- instead (the HTTP ceiling: same connections, no authentication, no ledger read).
-- done() prints one BENCH_RESULT line of KEY=VALUE fields for scripts/bench-api.

local threads = {}

function setup(thread)
    thread:set("thread_index", #threads)
    table.insert(threads, thread)
end

local users, headers, paths
local turn = 0

function init(args)
    users = tonumber(args[1])
    assert(users and users > 0 and args[2], "usage: -- USERS TOKEN [PATHS]")
    headers = { ["Authorization"] = "Bearer " .. args[2] }
    paths = {}
    for path in string.gmatch(args[3] or "subscription,entitlements", "[^,]+") do
        paths[#paths + 1] = path
    end
    math.randomseed(os.time() * 1000 + (thread_index or 0) * 7919)
    responses = 0  -- globals: done() reads them through thread:get
    non2xx = 0
    statuses = {}
end

function request()
    turn = turn + 1
    local path = paths[(turn % #paths) + 1]
    if path == "-" then
        return wrk.format("GET", "/healthz")
    end
    return wrk.format("GET", "/v1/users/user_" .. math.random(0, users - 1) .. "/" .. path, headers)
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
        "BENCH_RESULT responses=%d non2xx=%d statuses=%s duration_us=%d wrk_requests=%d " ..
        "p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d mean_us=%.0f " ..
        "err_connect=%d err_read=%d err_write=%d err_timeout=%d\n",
        responses_total, non2xx_total, (#status_list > 0 and table.concat(status_list, ",") or "-"),
        summary.duration, summary.requests,
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean,
        e.connect, e.read, e.write, e.timeout))
end
