-- wrk script of scripts/bench-api: status and entitlement reads of random users.
--
--   wrk -t T -c C -d D --latency -s api_reads.lua URL -- USERS TOKEN [PATHS]
--
-- Each request picks a user uniformly from user_0 … user_(USERS-1) and, in turn, one of PATHS
-- (comma-separated, default "subscription,entitlements"), and sends
-- `GET /v1/users/USER/PATH` with `Authorization: Bearer TOKEN`. PATHS "-" sends `GET /healthz`
-- instead (the HTTP ceiling: same connections, no authentication, no ledger read).
-- wrk_counts.lua counts the answers and prints the BENCH_RESULT line for scripts/bench-api.

dofile("scripts/bench/wrk_counts.lua")

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
    reset_counts()
end

function request()
    turn = turn + 1
    local path = paths[(turn % #paths) + 1]
    if path == "-" then
        return wrk.format("GET", "/healthz")
    end
    return wrk.format("GET", "/v1/users/user_" .. math.random(0, users - 1) .. "/" .. path, headers)
end
