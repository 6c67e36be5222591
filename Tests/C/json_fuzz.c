/*
 * Fuzzes the two JSON readers of the C interface (`make fuzz`): outbox_track's properties and outbox_open's
 * configuration, with inputs mutated from valid seeds (bit flips, byte insertions and deletions, truncations,
 * splices, runs of random bytes and of JSON punctuation). Every call must return, with 0 or OUTBOX_EINVAL (track)
 * or NULL and a message (open); nothing may crash, hang or leave outbox_last_error empty after a failure. Valid
 * property sets are stored by a store-only engine; configurations name a store under a directory that does not
 * exist, relative to DIR (the harness works there), so that most valid ones fail at the store rather than opening
 * an engine per input, and a mutated path stays inside DIR.
 * Usage: json_fuzz DIR [ITERATIONS] [SEED]
 */
#define _GNU_SOURCE
#include <outbox.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t state;

static uint64_t next(void) { /* xorshift64*: reproducible from the seed */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ull;
}

static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static const char *property_seeds[] = {
    "{\"plan\":\"pro\",\"seats\":3,\"trial\":true}",
    "{\"price\":-9.99e-2,\"big\":9223372036854775807,\"small\":-9223372036854775808,\"f\":false}",
    "{\"s\":\"caf\\u00e9 \\ud83d\\ude00 \\\"quoted\\\" \\\\ \\/ \\b\\f\\n\\r\\t\",\"e\":\"\"}",
    "{\"\xC3\xA9t\xC3\xA9\":\"\xE2\x82\xAC \xF0\x9F\x98\x80\",\"n\":0,\"m\":1.0E+3}",
    " { \"a\" : 1 , \"b\" : \"two\" } ",
    "{}",
    "{\"k01\":1,\"k02\":2,\"k03\":3,\"k04\":4,\"k05\":5,\"k06\":6,\"k07\":7,\"k08\":8,\"k09\":9,\"k10\":10,"
    "\"k11\":11,\"k12\":12,\"k13\":13,\"k14\":14,\"k15\":15,\"k16\":16,\"k17\":17,\"k18\":18,\"k19\":19,\"k20\":20,"
    "\"k21\":21,\"k22\":22}",
};

static const char *config_seeds[] = {
    "{\"storePath\":\"none/none/x.outbox\",\"endpoint\":\"http://127.0.0.1:9\",\"appSecret\":\"s\",\"batchSize\":50,"
    "\"retryIntervalsMs\":[1000,5000],\"probeIntervalMs\":null,\"bodyCompression\":\"zlib:6\",\"watchesNetwork\":false,"
    "\"sessionTracking\":\"manual\",\"logLevel\":\"critical\",\"maxLogCount\":100,\"appNamespace\":null}",
    "{\"storePath\":\"none/none/y.outbox\",\"transmissionIntervalMs\":6000,\"criticalTransmissionIntervalMs\":3000,"
    "\"maxStorageSize\":1048576,\"testingAllowsValuesBelowBounds\":true,\"dispatchIntervalMs\":0,\"logLevel\":\"critical\"}",
};

static const char punctuation[] = "{}[]:,\"\\ -+.eE0123456789tfnul\x80\xC3\xED\xF0\xFF";

static size_t mutate(char *out, size_t cap, const char *seed) {
    size_t len = strlen(seed);
    if (len >= cap) len = cap - 1;
    memcpy(out, seed, len);
    int edits = 1 + (int)below(4);
    for (int e = 0; e < edits; e++) {
        switch (below(7)) {
        case 0: /* flip a bit */
            if (len) out[below(len)] ^= (char)(1u << below(8));
            break;
        case 1: /* insert a byte */
            if (len + 1 < cap) {
                size_t at = below(len + 1);
                memmove(out + at + 1, out + at, len - at);
                out[at] = below(2) ? punctuation[below(sizeof punctuation - 1)] : (char)below(256);
                len++;
            }
            break;
        case 2: /* delete a run */
            if (len) {
                size_t at = below(len), n = 1 + below(4);
                if (at + n > len) n = len - at;
                memmove(out + at, out + at + n, len - at - n);
                len -= n;
            }
            break;
        case 3: /* truncate */
            len = below(len + 1);
            break;
        case 4: { /* splice a piece of another seed */
            const char *other = property_seeds[below(sizeof property_seeds / sizeof *property_seeds)];
            size_t olen = strlen(other), from = below(olen), n = below(olen - from + 1), at = below(len + 1);
            if (len + n < cap) {
                memmove(out + at + n, out + at, len - at);
                memcpy(out + at, other + from, n);
                len += n;
            }
            break;
        }
        case 5: /* overwrite with punctuation */
            for (size_t n = 1 + below(3); n && len; n--) out[below(len)] = punctuation[below(sizeof punctuation - 1)];
            break;
        default: /* duplicate a run (repeated keys, deep nesting) */
            if (len) {
                size_t at = below(len), n = 1 + below(16);
                if (at + n > len) n = len - at;
                if (len + n < cap) {
                    memmove(out + at + n, out + at, len - at);
                    len += n;
                }
            }
            break;
        }
    }
    /* A NUL inside ends the C string early: that is one more input, not a problem. */
    out[len] = '\0';
    return len;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [ITERATIONS] [SEED]\n", argv[0]);
        return 2;
    }
    long iterations = argc > 2 ? atol(argv[2]) : 1000000;
    state = argc > 3 ? strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ull + 1 : 0x5EED;
    if (chdir(argv[1]) != 0) {
        perror(argv[1]);
        return 2;
    }
    char config[4096], input[4096];
    snprintf(config, sizeof config,
             "{\"storePath\":\"fuzz.outbox\",\"maxStorageSize\":1099511627776,\"maxDistinctEventNames\":10000,"
             "\"sessionTracking\":\"manual\",\"logLevel\":\"critical\"}");
    outbox_engine *engine = outbox_open(config, NULL);
    if (!engine) {
        fprintf(stderr, "outbox_open: %s\n", outbox_last_error());
        return 1;
    }
    long accepted = 0, refused = 0, opened = 0, bad = 0;
    for (long i = 0; i < iterations; i++) {
        if (i % 16 == 15) { /* one input in 16 is a configuration */
            mutate(input, sizeof input, config_seeds[below(2)]);
            outbox_engine *other = outbox_open(input, NULL);
            if (other) {
                opened++;
                outbox_close(other, 0);
                outbox_free(other);
            } else if (!outbox_last_error()[0]) {
                bad++;
                fprintf(stderr, "open failed without a message: %s\n", input);
            }
            continue;
        }
        mutate(input, sizeof input, property_seeds[below(sizeof property_seeds / sizeof *property_seeds)]);
        int rc = outbox_track(engine, "fuzz", input, 0);
        if (rc == 0) {
            accepted++;
        } else if (rc == OUTBOX_EINVAL && outbox_last_error()[0]) {
            refused++;
        } else {
            bad++;
            fprintf(stderr, "track returned %d (%s) for: %s\n", rc, outbox_last_error(), input);
        }
    }
    int closed = outbox_close(engine, 0);
    outbox_free(engine);
    printf("{\"inputs\":%ld,\"properties_accepted\":%ld,\"properties_refused\":%ld,\"configs_opened\":%ld,"
           "\"unexpected\":%ld,\"close\":%d}\n", iterations, accepted, refused, opened, bad, closed);
    return bad || closed != 0 ? 1 : 0;
}
