/*
 * Compares zlib and zstd on the bodies billingd stores (issue 38): the share of its size a body
 * keeps, and microseconds per body to compress (a fresh stream or context per body, and one
 * reused) and to decompress.
 *
 *   gcc -O2 -o /tmp/compression scripts/bench/compression.c -lz -lzstd
 *   STRIPE_WEBHOOK_SECRET=whsec_x python3 scripts/bench/gen_events.py --events 2100 --run cmp \
 *       --fixtures Fixtures/objects --out /tmp/requests.tsv
 *   /tmp/compression /tmp/requests.tsv
 *
 * The input is scripts/bench/gen_events.py's file: one delivery a line, `<signature>\t<body>`.
 * Each measurement passes over every body ROUNDS times; the figures are per body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

enum { ROUNDS = 5 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

typedef struct {
    unsigned char *bytes;
    size_t size;
} body;

static body *read_bodies(const char *path, size_t *count) {
    FILE *file = fopen(path, "rb");
    if (!file) { perror(path); exit(1); }
    size_t capacity = 1024;
    body *bodies = malloc(capacity * sizeof *bodies);
    char *line = NULL;
    size_t length = 0;
    ssize_t read;
    *count = 0;
    while ((read = getline(&line, &length, file)) > 0) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        size_t size = (size_t)(line + read - (tab + 1));
        if (size > 0 && tab[1 + size - 1] == '\n') size--;
        if (*count == capacity) bodies = realloc(bodies, (capacity *= 2) * sizeof *bodies);
        bodies[*count].bytes = malloc(size);
        memcpy(bodies[*count].bytes, tab + 1, size);
        bodies[*count].size = size;
        (*count)++;
    }
    free(line);
    fclose(file);
    return bodies;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s requests.tsv\n", argv[0]); return 2; }
    size_t count, total = 0;
    body *bodies = read_bodies(argv[1], &count);
    if (count == 0) { fprintf(stderr, "no bodies in %s\n", argv[1]); return 1; }
    for (size_t i = 0; i < count; i++) total += bodies[i].size;
    printf("%zu bodies, %zu bytes on average\n", count, total / count);
    printf("%-22s %7s %14s %14s %12s\n", "codec", "stored", "us fresh", "us reused", "us inflate");

    static unsigned char out[1 << 22], back[1 << 22];
    int zlib_levels[] = {1, 6, 9};
    for (int l = 0; l < 3; l++) {
        int level = zlib_levels[l];
        size_t stored = 0;
        double start = now();
        for (int r = 0; r < ROUNDS; r++)
            for (size_t i = 0; i < count; i++) {
                uLongf size = sizeof out;
                compress2(out, &size, bodies[i].bytes, bodies[i].size, level);
                if (r == 0) stored += size;
            }
        double fresh = (now() - start) / (ROUNDS * count) * 1e6;
        z_stream stream = {0};
        deflateInit(&stream, level);
        start = now();
        for (int r = 0; r < ROUNDS; r++)
            for (size_t i = 0; i < count; i++) {
                deflateReset(&stream);
                stream.next_in = bodies[i].bytes; stream.avail_in = (uInt)bodies[i].size;
                stream.next_out = out; stream.avail_out = sizeof out;
                deflate(&stream, Z_FINISH);
            }
        double reused = (now() - start) / (ROUNDS * count) * 1e6;
        deflateEnd(&stream);
        double inflate_us = 0;
        start = now();
        for (int r = 0; r < ROUNDS; r++)
            for (size_t i = 0; i < count; i++) {
                uLongf size = sizeof out;
                compress2(out, &size, bodies[i].bytes, bodies[i].size, level);
                uLongf back_size = sizeof back;
                double t = now();
                uncompress(back, &back_size, out, size);
                inflate_us += now() - t;
            }
        (void)start;
        printf("zlib level %-11d %6.1f%% %14.1f %14.1f %12.1f\n", level, 100.0 * stored / total, fresh, reused,
               inflate_us / (ROUNDS * count) * 1e6);
    }

    int zstd_levels[] = {1, 3, 6};
    ZSTD_CCtx *context = ZSTD_createCCtx();
    ZSTD_DCtx *decompression = ZSTD_createDCtx();
    for (int l = 0; l < 3; l++) {
        int level = zstd_levels[l];
        size_t stored = 0;
        double start = now();
        for (int r = 0; r < ROUNDS; r++)
            for (size_t i = 0; i < count; i++) {
                size_t size = ZSTD_compress(out, sizeof out, bodies[i].bytes, bodies[i].size, level);
                if (r == 0) stored += size;
            }
        double fresh = (now() - start) / (ROUNDS * count) * 1e6;
        ZSTD_CCtx_reset(context, ZSTD_reset_session_and_parameters);
        ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level);
        ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
        start = now();
        double inflate_us = 0;
        for (int r = 0; r < ROUNDS; r++)
            for (size_t i = 0; i < count; i++) {
                size_t size = ZSTD_compress2(context, out, sizeof out, bodies[i].bytes, bodies[i].size);
                double t = now();
                ZSTD_decompressDCtx(decompression, back, sizeof back, out, size);
                inflate_us += now() - t;
            }
        double reused = ((now() - start) - inflate_us) / (ROUNDS * count) * 1e6;
        printf("zstd level %-11d %6.1f%% %14.1f %14.1f %12.1f\n", level, 100.0 * stored / total, fresh, reused,
               inflate_us / (ROUNDS * count) * 1e6);
    }
    ZSTD_freeCCtx(context);
    ZSTD_freeDCtx(decompression);
    return 0;
}
