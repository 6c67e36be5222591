/*
 * A C host on its own libuv loop, written only against the installed outbox.h (docs/EMBEDDING.md):
 *   cc host.c $(pkg-config --cflags --libs outbox libuv) -o host && ./host http://127.0.0.1:8080 /tmp/host.outbox
 * Records a session with a screen, 100 events and a timed load in it (SPEC E5), dispatches until nothing waits,
 * closes, and exits 0 when the loop ended clean.
 */
#include <outbox.h>
#include <stdio.h>
#include <uv.h>

static void dispatched(int result, void *ctx) { /* on the loop thread */
    outbox_engine *engine = ctx;
    if (result == OUTBOX_DISPATCH_GOOD) {          /* more may be waiting: go on until NO_DATA */
        outbox_dispatch(engine, dispatched, engine);
        return;
    }
    char *status = outbox_status(engine);          /* ours to free */
    printf("%s\nstatus: %s\n", result == OUTBOX_DISPATCH_NO_DATA ? "delivered" : "not delivered (kept)",
           status ? status : outbox_last_error());
    outbox_free(status);
    outbox_close(engine, 2000);                    /* returns at once; the engine stops within 2 s */
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
    const char *store = argc > 2 ? argv[2] : "/tmp/outbox-host.outbox";
    uv_loop_t loop;
    uv_loop_init(&loop);

    char config[1024];
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"endpoint\":\"%s\",\"appSecret\":\"example\",\"batchSize\":50,"
             "\"retryIntervalsMs\":[1000,5000],\"logLevel\":\"warning\"}", store, url);
    outbox_engine *engine = outbox_open(config, &loop); /* on the thread that runs `loop` */
    if (!engine) {
        fprintf(stderr, "outbox_open: %s\n", outbox_last_error());
        return 1;
    }
    outbox_start_session(engine);                  /* "sessionTracking" is automatic here: this starts a new one */
    outbox_track_screen(engine, "Home", "/home", "{\"source\":\"launch\"}");
    int64_t load = outbox_start_timer(engine, "load"); /* a duration on the boot clock */
    for (int i = 0; i < 100; i++) {
        char properties[96];
        snprintf(properties, sizeof properties, "{\"i\":%d,\"plan\":\"pro\",\"price\":9.99,\"trial\":true}", i);
        if (outbox_track(engine, "example", properties, 0) != 0)
            fprintf(stderr, "outbox_track: %s\n", outbox_last_error());
    }
    if (load > 0) outbox_end_timer(engine, load, NULL, 0); /* "load" with $event_duration in ms */
    outbox_end_session(engine);
    outbox_dispatch(engine, dispatched, engine);   /* holds the loop until `dispatched` has run */

    uv_run(&loop, UV_RUN_DEFAULT);                 /* ends by itself once the engine has stopped */
    int closed = uv_loop_close(&loop);             /* 0: the engine left no handle behind */
    outbox_free(engine);
    printf("uv_loop_close: %d\n", closed);
    return closed == 0 ? 0 : 1;
}
