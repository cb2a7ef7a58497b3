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
-- wrk_counts.lua counts the answers and prints the BENCH_RESULT line.

dofile("scripts/bench/wrk_counts.lua")

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
    reset_counts()
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
