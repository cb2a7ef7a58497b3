-- wrk script of scripts/bench-ingest: sends every pre-built, pre-signed delivery exactly once.
--
--   [BENCH_DELAY_MS=D] wrk -t T -c C -d MAX -s ingest.lua URL -- REQUESTS_FILE PATH THREADS
--
-- With BENCH_DELAY_MS, each connection waits D ms before each request, so C connections offer
-- about C × 1000 / D deliveries/s: the latency of a paced load, not of a burst. (An environment
-- variable, because wrk looks for delay() once, before any thread's init() has its arguments;
-- without it there is no delay() and no timer per request.)
-- REQUESTS_FILE has one delivery a line: `<Stripe-Signature>\t<body>` (scripts/bench/gen_events.py).
-- Thread k (of THREADS) takes lines k+1, k+1+THREADS, … : disjoint shares, all of them covered.
--
-- wrk 4.1 has three quirks this script works around (wrk runs LuaJIT, so it uses the FFI):
--  * it calls request() once on thread 0's state, from the main thread, to check the request
--    ("verify"); that call must not use up a delivery, so it is recognised by pthread_self();
--  * a thread's init() runs before the next thread is even created, so the first threads would
--    start the load alone while the others still load their shares: every thread waits, at its
--    first request(), until all threads are loaded;
--  * wrk's main thread sleeps for the whole -d duration even after every thread has stopped,
--    and that sleep is what wrk reports as the duration: the last thread to finish sends
--    SIGINT to wrk, which ends the sleep (wrk's own Ctrl-C handling), so the reported duration
--    is the time the load really took.
-- When a thread has sent its share, request() returns "" (nothing is written; the connection
-- stays idle); when all its responses are in, response() stops the thread.

local ffi = require("ffi")
ffi.cdef [[
    typedef struct { long opaque[8]; } bench_mutex_t;  /* glibc pthread_mutex_t is 40 bytes; zeroed = unlocked */
    typedef struct { bench_mutex_t mutex; int ready; int finished; } bench_shared_t;
    int pthread_mutex_lock(bench_mutex_t *mutex);
    int pthread_mutex_unlock(bench_mutex_t *mutex);
    unsigned long pthread_self(void);
    int getpid(void);
    int kill(int pid, int sig);
    int usleep(unsigned int usec);
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec_t;
    int clock_gettime(int clock, bench_timespec_t *time);
]]

local SIGINT = 2
local CLOCK_THREAD_CPUTIME_ID = 3

local function thread_cpu_seconds()
    local now = ffi.new("bench_timespec_t")
    ffi.C.clock_gettime(CLOCK_THREAD_CPUTIME_ID, now)
    return tonumber(now.tv_sec) + tonumber(now.tv_nsec) / 1e9
end

-- Setup and done phases: one separate Lua state, which owns the memory shared by the threads.
local threads = {}
local shared_memory = nil

-- BENCH_PORTS (comma-separated) spreads the threads over several replicas on 127.0.0.1, as a
-- load balancer would: thread k connects to port k mod N.
local ports = {}
for port in string.gmatch(os.getenv("BENCH_PORTS") or "", "%d+") do table.insert(ports, port) end

function setup(thread)
    if shared_memory == nil then
        shared_memory = ffi.new("bench_shared_t[1]")  -- zeroed; kept alive by this upvalue until exit
    end
    if #ports > 1 then
        thread.addr = wrk.lookup("127.0.0.1", ports[(#threads % #ports) + 1])[1]
    end
    thread:set("thread_index", #threads)
    thread:set("shared_address", tonumber(ffi.cast("uintptr_t", shared_memory)))
    table.insert(threads, thread)
end

-- Running phase: one Lua state per thread.
local requests = {}
local next_request = 1
share = 0  -- global: done() reads it through thread:get
local shared = nil
local thread_count = 0
local main_thread = nil
local waited = false

local function with_lock(body)
    ffi.C.pthread_mutex_lock(shared.mutex)
    local result = body()
    ffi.C.pthread_mutex_unlock(shared.mutex)
    return result
end

function init(args)
    local file, path = args[1], args[2]
    thread_count = tonumber(args[3])
    assert(file and path and thread_count, "usage: -- REQUESTS_FILE PATH THREADS")
    main_thread = ffi.C.pthread_self()
    shared = ffi.cast("bench_shared_t *", shared_address)  -- thread_index, shared_address: set by setup()

    sent = 0        -- read by done() through thread:get
    responses = 0
    non2xx = 0
    statuses = {}
    cpu_seconds = 0  -- CPU time of this thread from its first request to its last response

    local line_number = 0
    for line in io.lines(file) do
        if line_number % thread_count == thread_index then
            local tab = line:find("\t", 1, true)
            local headers = {
                ["Content-Type"] = "application/json; charset=utf-8",
                ["Stripe-Signature"] = line:sub(1, tab - 1),
                ["User-Agent"] = "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            }
            requests[#requests + 1] = wrk.format("POST", path, headers, line:sub(tab + 1))
        end
        line_number = line_number + 1
    end
    share = #requests
    with_lock(function() shared.ready = shared.ready + 1 end)
end

local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "")
if delay_ms then
    function delay()
        return delay_ms
    end
end

function request()
    if ffi.C.pthread_self() == main_thread then
        return requests[1]  -- wrk's verify call, from the main thread: not sent, not counted
    end
    if not waited then
        while with_lock(function() return shared.ready end) < thread_count do ffi.C.usleep(1000) end
        waited = true
        cpu_started = thread_cpu_seconds()
    end
    if next_request > share then return "" end
    local r = requests[next_request]
    requests[next_request] = nil  -- let the memory go
    next_request = next_request + 1
    sent = sent + 1
    return r
end

function response(status, headers, body)
    responses = responses + 1
    if status < 200 or status > 299 then
        non2xx = non2xx + 1
        statuses[tostring(status)] = (statuses[tostring(status)] or 0) + 1
    end
    if responses == share then
        cpu_seconds = thread_cpu_seconds() - cpu_started
        wrk.thread:stop()
        local last = with_lock(function()
            shared.finished = shared.finished + 1
            return shared.finished == thread_count
        end)
        if last then ffi.C.kill(ffi.C.getpid(), SIGINT) end
    end
end

function done(summary, latency, _)
    local sent_total, responses_total, non2xx_total, shares, cpu_total = 0, 0, 0, 0, 0
    local statuses_total = {}
    for _, thread in ipairs(threads) do
        sent_total = sent_total + thread:get("sent")
        responses_total = responses_total + thread:get("responses")
        non2xx_total = non2xx_total + thread:get("non2xx")
        shares = shares + thread:get("share")
        cpu_total = cpu_total + thread:get("cpu_seconds")
        for status, count in pairs(thread:get("statuses")) do
            statuses_total[status] = (statuses_total[status] or 0) + count
        end
    end
    local status_list = {}
    for status, count in pairs(statuses_total) do status_list[#status_list + 1] = status .. ":" .. count end
    local e = summary.errors
    io.write(string.format(
        "BENCH_RESULT planned=%d sent=%d responses=%d non2xx=%d statuses=%s duration_us=%d wrk_requests=%d wrk_load_cpu_s=%.3f " ..
        "p50_us=%d p90_us=%d p99_us=%d max_us=%d mean_us=%.0f " ..
        "err_connect=%d err_read=%d err_write=%d err_timeout=%d err_status=%d\n",
        shares, sent_total, responses_total, non2xx_total,
        (#status_list > 0 and table.concat(status_list, ",") or "-"),
        summary.duration, summary.requests, cpu_total,
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
        e.connect, e.read, e.write, e.timeout, e.status))
end
