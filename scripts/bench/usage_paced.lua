-- wrk script of scripts/bench-usage: usage_writes.lua at a fixed offered rate. Each connection
-- waits DELAY_MS before each request, so C connections offer about C × 1000 / DELAY_MS
-- requests/s as long as answers come back faster than that.
--
--   wrk -t T -c C -d D --latency -s usage_paced.lua URL -- USERS TOKEN MODE RUN DELAY_MS
dofile("scripts/bench/usage_writes.lua")

function delay()
    return pause_ms
end
