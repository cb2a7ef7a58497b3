-- Shared by the wrk scripts of scripts/bench-api and scripts/bench-usage (dofile'd from the
-- repository's root): registers each thread, counts answers and non-200s per thread, and done()
-- prints one BENCH_RESULT line of KEY=VALUE fields for the bench script to read.

local threads = {}

function setup(thread)
    thread:set("thread_index", #threads)
    table.insert(threads, thread)
end

-- Called from each script's init(): the counters are globals, which done() reads through thread:get.
function reset_counts()
    responses = 0
    non2xx = 0
    statuses = {}
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
