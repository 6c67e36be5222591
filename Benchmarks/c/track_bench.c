/*
 * `make bench`: the caller-side cost of outbox_track (SPEC E: at most 1.5x Swift's trackEvent on the caller's
 * thread), measured as `outbox-bench caller` measures trackEvent: the same event (an integer and two padding
 * strings, ~300 bytes stored), the JSON text made before the clock starts, each call timed with CLOCK_MONOTONIC.
 * Usage: track_bench STORE-DIR [CALLS]   Prints one JSON line.
 */
#define _GNU_SOURCE
#include <outbox.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE-DIR [CALLS]\n", argv[0]);
        return 2;
    }
    long calls = argc > 2 ? atol(argv[2]) : 1000000;
    char config[1024], pad_a[111], pad_b[61], properties[256];
    snprintf(config, sizeof config, "{\"storePath\":\"%s/c-bench.outbox\",\"maxStorageSize\":1073741824}", argv[1]);
    memset(pad_a, 'a', 110);
    pad_a[110] = '\0';
    memset(pad_b, 'b', 60);
    pad_b[60] = '\0';
    outbox_engine *engine = outbox_open(config, NULL);
    if (!engine) {
        fprintf(stderr, "outbox_open: %s\n", outbox_last_error());
        return 1;
    }
    uint64_t *latencies = malloc(sizeof *latencies * (size_t)calls);
    long failures = 0;
    uint64_t start = mono_ns();
    for (long i = 0; i < calls; i++) {
        snprintf(properties, sizeof properties, "{\"i\":%ld,\"padA\":\"%s\",\"padB\":\"%s\"}", i, pad_a, pad_b);
        uint64_t before = mono_ns();
        if (outbox_track(engine, "bench", properties, 0) != 0) failures++;
        latencies[i] = mono_ns() - before;
    }
    double elapsed = (double)(mono_ns() - start) / 1e9;
    outbox_close(engine, 0);
    outbox_free(engine);
    qsort(latencies, (size_t)calls, sizeof *latencies, compare);
    printf("{\"bench\":\"outbox_track caller\",\"threads\":1,\"calls\":%ld,\"failures\":%ld,\"calls_per_s\":%.0f,"
           "\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f}\n",
           calls, failures, (double)calls / elapsed, latencies[calls / 2] / 1000.0,
           latencies[(long)(calls * 0.99)] / 1000.0, latencies[(long)(calls * 0.999)] / 1000.0);
    free(latencies);
    return failures ? 1 : 0;
}
