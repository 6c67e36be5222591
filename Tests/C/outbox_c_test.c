/*
 * SPEC E1–E3 from a C host, built only against the installed outbox.h and libOutbox.so (`make c-test`).
 * Usage: outbox_c_test PATH-TO-outbox-mock
 * Each scenario starts its own outbox-mock (--port 0) and reads /_mock/stats for what arrived.
 */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <outbox.h>

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

static int passed, failed;
static const char *mock_binary;
static char temp_dir[256];

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (cond) {                                                                       \
            passed++;                                                                     \
        } else {                                                                          \
            failed++;                                                                     \
            fprintf(stderr, "FAIL %s:%d: %s — ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", outbox_last_error());                  \
        }                                                                                 \
    } while (0)

/* ---- The mock server ---- */

struct mock {
    pid_t pid;
    char url[128];
};

static int mock_start(struct mock *m, const char *extra_arg, const char *extra_value) {
    int out[2];
    if (pipe(out) != 0) return -1;
    m->pid = fork();
    if (m->pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        if (extra_arg)
            execl(mock_binary, mock_binary, "--port", "0", extra_arg, extra_value, (char *)NULL);
        else
            execl(mock_binary, mock_binary, "--port", "0", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[256];
    int ok = -1;
    while (fgets(line, sizeof line, f)) {
        char *at = strstr(line, "listening on ");
        if (at) {
            snprintf(m->url, sizeof m->url, "%s", at + strlen("listening on "));
            m->url[strcspn(m->url, "\r\n")] = '\0';
            ok = 0;
            break;
        }
    }
    /* The mock keeps writing nothing else of interest; leave the pipe open so it never gets SIGPIPE. */
    return ok;
}

static void mock_stop(struct mock *m) {
    if (m->pid > 0) {
        kill(m->pid, SIGTERM);
        waitpid(m->pid, NULL, 0);
        m->pid = 0;
    }
}

struct buffer { char data[65536]; size_t len; };

static size_t collect(char *ptr, size_t size, size_t n, void *user) {
    struct buffer *b = user;
    size_t take = size * n;
    if (take > sizeof b->data - 1 - b->len) take = sizeof b->data - 1 - b->len;
    memcpy(b->data + b->len, ptr, take);
    b->len += take;
    b->data[b->len] = '\0';
    return size * n;
}

/* GET url+path into body; 0 on success. */
static int mock_get(struct mock *m, const char *path, struct buffer *body) {
    char url[256];
    snprintf(url, sizeof url, "%s%s", m->url, path);
    body->len = 0;
    body->data[0] = '\0';
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    return rc == CURLE_OK ? 0 : -1;
}

/* A number field of /_mock/stats, or -1. */
static long mock_stat(struct mock *m, const char *field) {
    static struct buffer body;
    char key[64];
    if (mock_get(m, "/_mock/stats", &body) != 0) return -1;
    snprintf(key, sizeof key, "\"%s\"", field);
    char *at = strstr(body.data, key);
    if (!at) return -1;
    at = strchr(at, ':');
    return at ? strtol(at + 1, NULL, 10) : -1;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void store_path(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s.outbox", temp_dir, name);
}

/* ---- The log handler ---- */

static atomic_int log_lines;

static void on_log(int level, const char *message, void *ctx) {
    (void)ctx;
    if (level >= OUTBOX_LOG_TRACE && level <= OUTBOX_LOG_CRITICAL && message && message[0]) atomic_fetch_add(&log_lines, 1);
}

/* outbox.h: the log handler must not close its engine (a line may come from inside a commit); it is refused. */
struct close_from_log { outbox_engine *engine; int tries, rc; char message[256]; };

static void close_from_log(int level, const char *message, void *ctx) {
    (void)level;
    (void)message;
    struct close_from_log *c = ctx;
    if (!c->engine || c->tries++ > 0) return;
    c->rc = outbox_close(c->engine, 0);
    snprintf(c->message, sizeof c->message, "%s", outbox_last_error());
}

static void test_close_from_the_log_handler(void) {
    char path[512], config[1024], name[300];
    store_path(path, sizeof path, "close-from-log");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"sessionTracking\":\"manual\",\"logLevel\":\"warning\"}",
             path);
    struct close_from_log c = {NULL, 0, 1, ""};
    outbox_set_log_handler(close_from_log, &c); /* engines keep the handler they opened with */
    outbox_engine *e = outbox_open(config, NULL);
    outbox_set_log_handler(on_log, NULL);
    CHECK(e != NULL, "outbox_open");
    if (!e) return;
    c.engine = e;
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    CHECK(outbox_track(e, name, NULL, 0) == 0, "a long name is cut, with a warning to the log handler");
    CHECK(c.tries == 1 && c.rc == OUTBOX_EINVAL && strstr(c.message, "log handler"),
          "outbox_close from the log handler: %d (%s)", c.rc, c.message);
    CHECK(outbox_track(e, "after", NULL, 0) == 0, "the engine is still open");
    CHECK(outbox_close(e, 0) == 0, "outbox_close");
    outbox_free(e);
}

/* ---- Tracking from several threads ---- */

#define THREADS 4
#define PER_THREAD 250

struct tracker {
    outbox_engine *engine;
    int index;
    int errors;
    uv_async_t *finished; /* host mode: tells the loop this thread is done */
};

static void *track_many(void *arg) {
    struct tracker *t = arg;
    char name[32], props[128];
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(name, sizeof name, "thread-%d", t->index);
        snprintf(props, sizeof props, "{\"i\":%d,\"ratio\":%d.5,\"even\":%s,\"who\":\"t\\u00e9st %d\"}", i, i,
                 i % 2 ? "false" : "true", t->index);
        /* The last one critical: on disk when the call returns, also from a thread that is not the loop's. */
        if (outbox_track(t->engine, name, props, i == PER_THREAD - 1 ? OUTBOX_CRITICAL : 0) != 0) t->errors++;
    }
    if (t->finished) uv_async_send(t->finished);
    return NULL;
}

/* ---- (a) a host on its own uv_loop_t ---- */

#define LOOP_EVENTS 10

struct host {
    uv_loop_t loop;
    uv_async_t finished;
    outbox_engine *engine;
    atomic_int threads_done;
    int dispatches, last_result, loop_errors, close_result;
    pthread_t loop_thread;
    int done_on_loop_thread;
};

static void host_dispatched(int result, void *ctx);

static void host_close(struct host *h) {
    h->close_result = outbox_close(h->engine, 3000);
    uv_close((uv_handle_t *)&h->finished, NULL);
}

static void host_dispatched(int result, void *ctx) {
    struct host *h = ctx;
    h->last_result = result;
    if (!pthread_equal(pthread_self(), h->loop_thread)) h->done_on_loop_thread = 0;
    if (result != OUTBOX_DISPATCH_NO_DATA && ++h->dispatches < 200) {
        outbox_dispatch(h->engine, host_dispatched, h);
        return;
    }
    host_close(h);
}

static void host_thread_finished(uv_async_t *async) {
    struct host *h = async->data;
    /* uv_async_send coalesces: count the threads that are done rather than the callbacks. */
    if (atomic_load(&h->threads_done) < THREADS) return;
    if (h->dispatches > 0) return;
    for (int i = 0; i < LOOP_EVENTS; i++) {
        if (outbox_track(h->engine, "from-loop", "{\"i\":1}", 0) != 0) h->loop_errors++;
    }
    h->dispatches = 1;
    outbox_dispatch(h->engine, host_dispatched, h);
}

struct counted_tracker { struct tracker t; struct host *h; };

static void *track_and_count(void *arg) {
    struct counted_tracker *c = arg;
    c->t.finished = NULL;
    track_many(&c->t);
    atomic_fetch_add(&c->h->threads_done, 1);
    uv_async_send(&c->h->finished);
    return NULL;
}

struct close_attempt { outbox_engine *engine; int rc; };

static void *close_from_elsewhere(void *arg) {
    struct close_attempt *attempt = arg;
    attempt->rc = outbox_close(attempt->engine, 0);
    return NULL;
}

static void test_host_loop(void) {
    struct mock m;
    CHECK(mock_start(&m, NULL, NULL) == 0, "outbox-mock starts");
    struct host h;
    memset(&h, 0, sizeof h);
    h.done_on_loop_thread = 1;
    h.loop_thread = pthread_self();
    CHECK(uv_loop_init(&h.loop) == 0, "uv_loop_init");
    char path[512], config[1024];
    store_path(path, sizeof path, "host");
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"endpoint\":\"%s\",\"appSecret\":\"s\",\"sessionTracking\":\"manual\","
             "\"logLevel\":\"info\",\"retryIntervalsMs\":[1000,1000]}",
             path, m.url);
    h.engine = outbox_open(config, &h.loop);
    CHECK(h.engine != NULL, "outbox_open on the host's loop");
    if (!h.engine) { mock_stop(&m); return; }
    {
        /* With a caller's loop, outbox_close belongs to the loop's thread: from another one it is refused, and the
           engine stays open. */
        struct close_attempt attempt = {h.engine, 1};
        pthread_t other;
        pthread_create(&other, NULL, close_from_elsewhere, &attempt);
        pthread_join(other, NULL);
        CHECK(attempt.rc == OUTBOX_EINVAL, "outbox_close from another thread than the loop's: %d", attempt.rc);
    }
    uv_async_init(&h.loop, &h.finished, host_thread_finished);
    h.finished.data = &h;

    struct counted_tracker trackers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        trackers[i] = (struct counted_tracker){{h.engine, i, 0, NULL}, &h};
        pthread_create(&threads[i], NULL, track_and_count, &trackers[i]);
    }
    int rc = uv_run(&h.loop, UV_RUN_DEFAULT); /* returns by itself once the engine has stopped */
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(trackers[i].t.errors == 0, "thread %d tracked without error", i);
    }
    CHECK(rc == 0, "uv_run returned by itself with nothing active (%d)", rc);
    CHECK(h.loop_errors == 0, "tracking from the loop thread");
    CHECK(h.last_result == OUTBOX_DISPATCH_NO_DATA, "dispatch drained to NO_DATA (last %d after %d)", h.last_result,
          h.dispatches);
    CHECK(h.done_on_loop_thread, "done ran on the loop thread");
    CHECK(h.close_result == 0, "outbox_close on the loop thread returns 0 at once");
    CHECK(uv_loop_close(&h.loop) == 0, "uv_loop_close returns 0: no handle of the engine left");
    CHECK(outbox_track(h.engine, "late", NULL, 0) == OUTBOX_ECLOSED, "tracking after close");
    outbox_free(h.engine);
    long unique = mock_stat(&m, "logs_unique");
    CHECK(unique == THREADS * PER_THREAD + LOOP_EVENTS, "the mock has every log: %ld of %d", unique,
          THREADS * PER_THREAD + LOOP_EVENTS);
    CHECK(atomic_load(&log_lines) > 0, "the log handler received lines (%d)", atomic_load(&log_lines));
    mock_stop(&m);
}

/* SPEC C7 (round 3): on the host's loop a dispatch right after normal events commits them first: its first answer
   is GOOD and the logs are delivered, never NO_DATA while they wait for their group-commit window. The host has no
   handle of its own (round 4: the pending dispatch holds the loop), and its last `done` closes the engine. */
struct first_dispatch {
    outbox_engine *engine;
    int first, calls, close_result;
};

static void first_dispatched(int result, void *ctx) {
    struct first_dispatch *d = ctx;
    if (d->calls++ == 0) d->first = result;
    if (result != OUTBOX_DISPATCH_NO_DATA && d->calls < 50) {
        outbox_dispatch(d->engine, first_dispatched, d);
        return;
    }
    d->close_result = outbox_close(d->engine, 3000); /* from `done`: returns at once, uv_run ends after the drain */
}

static void test_host_loop_dispatch_commits_first(void) {
    struct mock m;
    CHECK(mock_start(&m, NULL, NULL) == 0, "outbox-mock starts");
    uv_loop_t loop;
    CHECK(uv_loop_init(&loop) == 0, "uv_loop_init");
    char path[512], config[1024];
    store_path(path, sizeof path, "dispatch-first");
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"endpoint\":\"%s\",\"appSecret\":\"s\",\"sessionTracking\":\"manual\","
             "\"dispatchIntervalMs\":0}",
             path, m.url);
    struct first_dispatch d = {0};
    d.first = -100;
    d.close_result = -100;
    d.engine = outbox_open(config, &loop);
    CHECK(d.engine != NULL, "outbox_open on the host's loop");
    if (!d.engine) { mock_stop(&m); return; }
    for (int i = 0; i < 5; i++) {
        char properties[32];
        snprintf(properties, sizeof properties, "{\"i\":%d}", i);
        CHECK(outbox_track(d.engine, "normal", properties, 0) == 0, "normal event %d tracked", i);
    }
    CHECK(outbox_dispatch(d.engine, first_dispatched, &d) == 0, "outbox_dispatch");
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(d.first == OUTBOX_DISPATCH_GOOD, "the first dispatch after five normal events is GOOD (got %d)", d.first);
    CHECK(d.close_result == 0, "outbox_close from a done callback on the host's loop: %d", d.close_result);
    CHECK(uv_loop_close(&loop) == 0, "uv_loop_close returns 0");
    outbox_free(d.engine);
    long unique = mock_stat(&m, "logs_unique");
    CHECK(unique == 5, "the mock has the five normal logs: %ld", unique);
    mock_stop(&m);
}

/* SPEC C7 (round 4): a host with its own uv_loop_t and no handle of its own tracks five events, calls
   outbox_dispatch(e, done, NULL) and uv_run(UV_RUN_DEFAULT). The pending dispatch holds the loop as a libuv request
   does: uv_run returns only after `done` ran. Then the engine is idle and holds nothing: uv_run returns at once. */
static int held_result = -100, held_calls;

static void held_done(int result, void *ctx) {
    (void)ctx;
    held_result = result;
    held_calls++;
}

static void test_host_loop_dispatch_holds_the_loop(void) {
    struct mock m;
    CHECK(mock_start(&m, NULL, NULL) == 0, "outbox-mock starts");
    uv_loop_t loop;
    CHECK(uv_loop_init(&loop) == 0, "uv_loop_init");
    char path[512], config[1024];
    store_path(path, sizeof path, "dispatch-holds");
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"endpoint\":\"%s\",\"appSecret\":\"s\",\"sessionTracking\":\"manual\","
             "\"dispatchIntervalMs\":0}",
             path, m.url);
    outbox_engine *e = outbox_open(config, &loop);
    CHECK(e != NULL, "outbox_open on the host's loop");
    if (!e) { mock_stop(&m); return; }
    for (int i = 0; i < 5; i++) CHECK(outbox_track(e, "normal", "{\"i\":1}", 0) == 0, "normal event %d tracked", i);
    CHECK(outbox_dispatch(e, held_done, NULL) == 0, "outbox_dispatch");
    CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0, "uv_run returns by itself");
    CHECK(held_calls == 1 && held_result == OUTBOX_DISPATCH_GOOD,
          "done ran once, with GOOD, before uv_run returned (%d calls, result %d)", held_calls, held_result);
    CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0, "an idle engine holds nothing: uv_run returns at once");
    CHECK(outbox_close(e, 0) == 0, "outbox_close on the loop thread");
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0, "uv_loop_close returns 0");
    outbox_free(e);
    long unique = mock_stat(&m, "logs_unique");
    CHECK(unique == 5, "the mock has the five logs: %ld", unique);
    mock_stop(&m);
}

/* ---- (b) own-thread mode ---- */

struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, result;
};

static void waiter_done(int result, void *ctx) {
    struct waiter *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    w->result = result;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* One outbox_dispatch, waited for; the result given to done. */
static int dispatch_and_wait(outbox_engine *e) {
    struct waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1};
    if (outbox_dispatch(e, waiter_done, &w) != 0) return -100;
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    return w.result;
}

/* Own-thread mode: outbox_close from a `done` callback would wait for the very thread it runs on; it is refused. */
struct close_in_done { struct waiter w; outbox_engine *engine; int rc; char message[256]; };

static void close_in_done(int result, void *ctx) {
    struct close_in_done *c = ctx;
    c->rc = outbox_close(c->engine, 0);
    snprintf(c->message, sizeof c->message, "%s", outbox_last_error()); /* thread-local: this thread's */
    waiter_done(result, &c->w);
}

static int drain(outbox_engine *e) {
    int result = -1;
    for (int i = 0; i < 200 && result != OUTBOX_DISPATCH_NO_DATA; i++) result = dispatch_and_wait(e);
    return result;
}

static void test_own_thread(void) {
    struct mock m;
    CHECK(mock_start(&m, NULL, NULL) == 0, "outbox-mock starts");
    char path[512], config[1024];
    store_path(path, sizeof path, "own");
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"endpoint\":\"%s\",\"appSecret\":\"s\",\"sessionTracking\":\"manual\"}", path,
             m.url);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "outbox_open on a thread of its own");
    if (!e) { mock_stop(&m); return; }
    struct tracker trackers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        trackers[i] = (struct tracker){e, i, 0, NULL};
        pthread_create(&threads[i], NULL, track_many, &trackers[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(trackers[i].errors == 0, "thread %d tracked without error", i);
    }
    char *status = outbox_status(e);
    CHECK(status && strstr(status, "\"pending_normal\":") && strstr(status, "\"install_id\":\""), "status: %s",
          status ? status : "NULL");
    /* Every log whose outbox_track returned is counted (SPEC E3), committed or not. */
    long pending = -1, critical = -1;
    if (status) {
        char *at = strstr(status, "\"pending_normal\":");
        if (at) pending = strtol(at + 17, NULL, 10);
        at = strstr(status, "\"pending_critical\":");
        if (at) critical = strtol(at + 19, NULL, 10);
    }
    outbox_free(status);
    CHECK(pending + critical <= THREADS * PER_THREAD && pending + critical >= 0, "pending counts: %ld + %ld", pending,
          critical);
    CHECK(drain(e) == OUTBOX_DISPATCH_NO_DATA, "dispatch drains to NO_DATA");
    {
        struct close_in_done c = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1}, e, 1, ""};
        CHECK(outbox_dispatch(e, close_in_done, &c) == 0, "outbox_dispatch");
        pthread_mutex_lock(&c.w.lock);
        while (!c.w.done) pthread_cond_wait(&c.w.cond, &c.w.lock);
        pthread_mutex_unlock(&c.w.lock);
        CHECK(c.rc == OUTBOX_EINVAL && strstr(c.message, "callback"), "outbox_close from done on the engine's thread: %d (%s)",
              c.rc, c.message);
    }
    CHECK(outbox_close(e, 3000) == 0, "outbox_close: everything delivered");
    CHECK(outbox_close(e, 3000) == OUTBOX_ECLOSED, "a second close");
    outbox_free(e);
    long unique = mock_stat(&m, "logs_unique");
    CHECK(unique == THREADS * PER_THREAD, "the mock has every log: %ld of %d", unique, THREADS * PER_THREAD);
    mock_stop(&m);
}

/* An engine on a thread of its own for the mock `m`: store `name`, app secret `secret`, sessions and dispatch
   by hand (SPEC A2, C6), so that a test decides what is recorded and when it is sent. */
static outbox_engine *open_manual(struct mock *m, const char *name, const char *secret) {
    char path[512], config[1024];
    store_path(path, sizeof path, name);
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"endpoint\":\"%s\",\"appSecret\":\"%s\",\"sessionTracking\":\"manual\","
             "\"dispatchIntervalMs\":0}",
             path, m->url, secret);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "outbox_open (%s)", name);
    return e;
}

/* SPEC K1: "storeKeyFile" seals the store; the same store without its key is refused, and so is a key file that
   others can read, naming it; "storeKeyFile" in outbox_update rotates the key. */
static int error_names(const char *word);

static void write_key(const char *path, const char *hex, mode_t mode) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(hex, f);
    fclose(f);
    chmod(path, mode);
}

static void test_sealed_store(void) {
    char path[512], key[512], key2[512], loose[512], config[2048];
    store_path(path, sizeof path, "sealed");
    store_path(key, sizeof key, "sealed.key");
    store_path(key2, sizeof key2, "sealed2.key");
    store_path(loose, sizeof loose, "loose.key");
    write_key(key, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", 0600);
    write_key(key2, "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100", 0600);
    write_key(loose, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 0644);

    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"storeKeyFile\":\"%s\"}", path, loose);
    CHECK(outbox_open(config, NULL) == NULL && error_names("chmod 600") && error_names("loose.key"),
          "open: a key file others can read is refused, named");
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: a loose key file is OUTBOX_ECONFIG (%d)", outbox_last_error_code());

    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"storeKeyFile\":\"%s\"}", path, key);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "open with storeKeyFile");
    if (!e) return;
    CHECK(outbox_track(e, "sealed-event", "{\"k\":\"sealed-value\"}", OUTBOX_CRITICAL) == 0, "track into a sealed store");
    snprintf(config, sizeof config, "{\"storeKeyFile\":\"%s\"}", key2);
    CHECK(outbox_update(e, config) == 0, "update: storeKeyFile rotates the key");
    CHECK(outbox_track(e, "after-rotation", NULL, OUTBOX_CRITICAL) == 0, "track after the rotation began");
    CHECK(outbox_close(e, 0) == 0, "close the sealed engine");
    outbox_free(e);

    snprintf(config, sizeof config, "{\"storePath\":\"%s\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("store key invalid"), "open: a sealed store without its key");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"storeKeyFile\":\"%s\"}", path, key);
    CHECK(outbox_open(config, NULL) == NULL && error_names("is not the store's"), "open: the old key after a rotation");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"storeKeyFile\":\"%s\"}", path, key2);
    e = outbox_open(config, NULL);
    CHECK(e != NULL, "open with the new key");
    if (!e) return;
    char *status = outbox_status(e);
    CHECK(status && strstr(status, "\"pending_critical\":2"), "both events are there: %s", status ? status : "NULL");
    outbox_free(status);
    CHECK(outbox_close(e, 0) == 0, "close");
    outbox_free(e);
}

/* ---- (c) bad input ---- */

static int error_names(const char *word) { return strstr(outbox_last_error(), word) != NULL; }

/* SPEC D15: "destinations", an array of named destinations, each with its wire's own keys: two open; a name given
   twice, a key no destination takes and a key of another wire are refused with OUTBOX_ECONFIG naming them. */
static void test_destinations(void) {
    char path[512], config[1024];
    store_path(path, sizeof path, "destinations");
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destinations\":["
             "{\"name\":\"ops\",\"destination\":\"otlp\",\"endpoint\":\"http://127.0.0.1:9\",\"otlpEncoding\":\"json\","
             "\"headers\":{\"X-Tenant\":\"t1\"}},"
             "{\"name\":\"product\",\"destination\":\"posthog\",\"endpoint\":\"http://127.0.0.1:9\",\"apiKey\":\"phc_k\"}]}",
             path);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "open with two destinations: %s", outbox_last_error());
    if (e) {
        CHECK(outbox_track(e, "two", NULL, OUTBOX_CRITICAL) == 0, "track with two destinations: %s", outbox_last_error());
        /* Neither destination answers (port 9): the log stays stored for both, and a drain of 0 ms says so. */
        CHECK(outbox_close(e, 0) == OUTBOX_ETIMEDOUT, "close with two destinations keeps the log: %s", outbox_last_error());
        outbox_free(e);
    }
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destinations\":["
             "{\"name\":\"ops\",\"destination\":\"otlp\",\"endpoint\":\"http://127.0.0.1:9\"},"
             "{\"name\":\"ops\",\"destination\":\"otlp\",\"endpoint\":\"http://127.0.0.1:10\"}]}",
             path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("'ops' twice"), "open: a destination's name twice: %s",
          outbox_last_error());
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: a name twice is OUTBOX_ECONFIG (%d)", outbox_last_error_code());
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destinations\":["
             "{\"name\":\"ops\",\"destination\":\"otlp\",\"endpoint\":\"http://127.0.0.1:9\",\"batchSize\":5}]}",
             path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("destinations[0].batchSize"),
          "open: a key no destination takes, named: %s", outbox_last_error());
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: a key no destination takes is OUTBOX_ECONFIG (%d)",
          outbox_last_error_code());
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destinations\":["
             "{\"name\":\"ops\",\"destination\":\"otlp\",\"endpoint\":\"http://127.0.0.1:9\",\"apiKey\":\"phc_k\"}]}",
             path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("'destinations[0].apiKey' belongs to the posthog destination"),
          "open: a destination's key of another wire, named: %s", outbox_last_error());
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: a key of another wire is OUTBOX_ECONFIG (%d)", outbox_last_error_code());
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destinations\":[{\"name\":\"ops\",\"headers\":{\"X-A\":1}}]}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("destinations[0].headers"),
          "open: a destination's value of the wrong type, named: %s", outbox_last_error());
    CHECK(outbox_last_error_code() == OUTBOX_EINVAL, "open: a destination's value of the wrong type is OUTBOX_EINVAL (%d)",
          outbox_last_error_code());
}

/* BEHAVIOUR H2–H4: a destination's policy from C JSON — at the top level for the single destination, in a
   "destinations" element — opens and its status counts "skipped"; a rate
   outside 0–1 is OUTBOX_ECONFIG naming it, a list of the wrong type OUTBOX_EINVAL. */
static void test_policies(void) {
    char path[512], config[1024];
    store_path(path, sizeof path, "policies");
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destination\":\"otlp\",\"endpoint\":\"http://127.0.0.1:9\","
             "\"exclude\":[\"debug*\"],\"redact\":[\"email\"],\"sample\":{\"noisy\":0.5,\"*\":1}}", path);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "open with a top-level policy: %s", outbox_last_error());
    if (e) { outbox_close(e, 0); outbox_free(e); }
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destinations\":[{\"name\":\"ops\",\"destination\":\"otlp\","
             "\"endpoint\":\"http://127.0.0.1:9\",\"include\":[\"checkout*\",\"$identify\"]}]}", path);
    e = outbox_open(config, NULL);
    CHECK(e != NULL, "open with a destination's policy: %s", outbox_last_error());
    if (e) {
        char *status = outbox_status(e);
        CHECK(status != NULL && strstr(status, "\"skipped\":0") != NULL, "status has skipped: %s", status ? status : "NULL");
        outbox_free(status);
        outbox_close(e, 0);
        outbox_free(e);
    }
    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"destinations\":[{\"name\":\"ops\",\"destination\":\"otlp\","
             "\"endpoint\":\"http://127.0.0.1:9\",\"sample\":{\"debug*\":1.5}}]}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("destination 'ops': sample's rate for 'debug*'"),
          "open: a rate outside 0-1, named: %s", outbox_last_error());
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: a bad rate is OUTBOX_ECONFIG (%d)", outbox_last_error_code());
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"exclude\":\"debug\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("'exclude'"), "open: exclude not a list, named: %s", outbox_last_error());
    CHECK(outbox_last_error_code() == OUTBOX_EINVAL, "open: exclude not a list is OUTBOX_EINVAL (%d)", outbox_last_error_code());
}

static void *fresh_thread_error(void *arg) {
    const char **out = arg;
    *out = outbox_last_error();
    return NULL;
}

static void test_bad_input(void) {
    char path[512], config[1024];
    store_path(path, sizeof path, "bad");

    const char *fresh = NULL;
    pthread_t t;
    pthread_create(&t, NULL, fresh_thread_error, &fresh);
    pthread_join(t, NULL);
    CHECK(fresh != NULL && fresh[0] == '\0', "outbox_last_error on a fresh thread is \"\"");
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", OUTBOX_VERSION_MAJOR, OUTBOX_VERSION_MINOR, OUTBOX_VERSION_PATCH);
    CHECK(strcmp(outbox_version(), version) == 0, "outbox_version %s", outbox_version());

    CHECK(outbox_open(NULL, NULL) == NULL && outbox_last_error()[0], "open(NULL)");
    CHECK(outbox_open("{", NULL) == NULL && error_names("malformed"), "open: malformed JSON");
    CHECK(outbox_last_error_code() == OUTBOX_EINVAL, "open: malformed JSON is OUTBOX_EINVAL (%d)", outbox_last_error_code());
    CHECK(outbox_open("[]", NULL) == NULL && error_names("object"), "open: not an object");
    CHECK(outbox_open("{\"storePath\":\"/tmp/x\"} x", NULL) == NULL && error_names("malformed"), "open: trailing text");
    CHECK(outbox_open("{}", NULL) == NULL && error_names("storePath"), "open: storePath missing");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"transmissionInterval\":6000}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("transmissionInterval'"), "open: unknown key named");
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: an unknown key is OUTBOX_ECONFIG (%d)", outbox_last_error_code());
    /* SPEC X3a: an endpoint must be an absolute http(s) URL with a host. */
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"endpoint\":\"http://\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("endpoint"), "open: endpoint without a host refused");
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: a bad endpoint is OUTBOX_ECONFIG (%d)", outbox_last_error_code());
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"endpoint\":\"http://exa mple.com\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("endpoint"), "open: endpoint with a space refused");
    /* SPEC D1: an unknown destination is refused listing the known ones; headers are an object of strings with
       valid names that the engine does not set itself. */
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"kafka\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("kafka") && error_names("appcenter"), "open: unknown destination");
    CHECK(outbox_last_error_code() == OUTBOX_ECONFIG, "open: an unknown destination is OUTBOX_ECONFIG");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"headers\":{\"Bad Name\":\"v\"}}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("Bad Name"), "open: a header name that is not a token");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"headers\":{\"X-Tenant\":5}}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("X-Tenant"), "open: a header value that is not a string");
    CHECK(outbox_last_error_code() == OUTBOX_EINVAL, "open: a header value of the wrong type is OUTBOX_EINVAL");
    /* A key of another destination is refused by name; an OTLP encoding other than protobuf or json too. */
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"otlpEncoding\":\"json\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("otlpEncoding") && error_names("otlp destination"),
          "open: otlpEncoding with App Center refused by name");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"otlp\",\"apiKey\":\"phc_k\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("apiKey") && error_names("posthog destination"),
          "open: apiKey with OTLP refused by name");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"posthog\",\"endpoint\":\"http://127.0.0.1:9\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("apiKey") && error_names("posthog"),
          "open: PostHog without apiKey refused naming both");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"posthog\",\"writeKey\":\"wk\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("writeKey") && error_names("segment destination"),
          "open: writeKey with PostHog refused by name");
    /* SPEC D13, D14: apiKey is PostHog's and Amplitude's, named both; Mixpanel's keys are its own; a service account
       needs its projectId. */
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"segment\",\"apiKey\":\"k\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("posthog destination") && error_names("amplitude destination"),
          "open: apiKey with Segment refused naming its two destinations");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"amplitude\",\"projectToken\":\"t\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("projectToken") && error_names("mixpanel destination"),
          "open: projectToken with Amplitude refused by name");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"mixpanel\",\"endpoint\":\"http://127.0.0.1:9\","
             "\"serviceAccountUser\":\"u\",\"serviceAccountSecret\":\"s\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("projectId"), "open: a Mixpanel service account without projectId");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"segment\",\"writeKey\":\"wk\",\"segmentProfile\":\"mparticle\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("segment or rudderstack"), "open: an unknown Segment profile");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"destination\":\"otlp\",\"otlpEncoding\":\"xml\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("protobuf or json"), "open: an unknown OTLP encoding");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"batchSize\":\"50\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("batchSize"), "open: wrong type named");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"batchSize\":0}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("batchSize"), "open: out of bounds named");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"transmissionIntervalMs\":6000.5}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("transmissionIntervalMs"), "open: a fraction of a ms");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"appVersion\":\"\xC3\x28\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("UTF-8"), "open: invalid UTF-8");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"logLevel\":\"loud\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("logLevel"), "open: logLevel");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"sessionTracking\":\"sometimes\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("sessionTracking"), "open: enum");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"runMode\":\"x\"}", path);
    CHECK(outbox_open(config, NULL) == NULL && error_names("runMode"), "open: runMode has no key");

    CHECK(outbox_track(NULL, "x", NULL, 0) == OUTBOX_EINVAL, "track: NULL engine");
    CHECK(outbox_dispatch(NULL, NULL, NULL) == OUTBOX_EINVAL, "dispatch: NULL engine");
    CHECK(outbox_status(NULL) == NULL, "status: NULL engine");
    CHECK(outbox_set_enabled(NULL, 1) == OUTBOX_EINVAL, "set_enabled: NULL engine");
    CHECK(outbox_update(NULL, "{}") == OUTBOX_EINVAL, "update: NULL engine");
    CHECK(outbox_close(NULL, 0) == OUTBOX_EINVAL, "close: NULL engine");
    outbox_free(NULL);

    snprintf(config, sizeof config,
             "{\"storePath\":\"%s\",\"maxDistinctEventNames\":2,\"sessionTracking\":\"manual\",\"endpoint\":\"http://127.0.0.1:9\",\"appSecret\":\"s\"}",
             path);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "open");
    if (!e) return;
    CHECK(outbox_track(e, NULL, NULL, 0) == OUTBOX_EINVAL, "track: NULL name");
    CHECK(outbox_track(e, "", NULL, 0) == OUTBOX_EINVAL, "track: empty name");
    CHECK(outbox_track(e, "bad\xFF", NULL, 0) == OUTBOX_EINVAL && error_names("UTF-8"), "track: invalid UTF-8 name");
    CHECK(outbox_track(e, "a", "{\"k\":\"\xE2\x82\"}", 0) == OUTBOX_EINVAL && error_names("UTF-8"),
          "track: invalid UTF-8 value");
    CHECK(outbox_track(e, "a", "{\"k\":1", 0) == OUTBOX_EINVAL, "track: unterminated object");
    CHECK(outbox_track(e, "a", "{\"k\":{\"n\":1}}", 0) == OUTBOX_EINVAL && error_names("'k'"), "track: nested");
    CHECK(outbox_track(e, "a", "{\"k\":[1]}", 0) == OUTBOX_EINVAL, "track: an array value");
    CHECK(outbox_track(e, "a", "{\"k\":null}", 0) == OUTBOX_EINVAL, "track: null value");
    CHECK(outbox_track(e, "a", "[1]", 0) == OUTBOX_EINVAL, "track: not an object");
    CHECK(outbox_track(e, "a", "{\"k\":1,\"k\":2}", 0) == OUTBOX_EINVAL && error_names("twice"), "track: duplicate key");
    CHECK(outbox_track(e, "a", "{\"k\":01}", 0) == OUTBOX_EINVAL, "track: leading zero");
    CHECK(outbox_track(e, "a", "{\"k\":1e999}", 0) == OUTBOX_EINVAL, "track: infinite number");
    CHECK(outbox_track(e, "a", "{\"k\":\"\\ud800\"}", 0) == OUTBOX_EINVAL, "track: lone surrogate");
    CHECK(outbox_track(e, "a", "", 0) == OUTBOX_EINVAL, "track: empty properties text");
    CHECK(outbox_track(e, "a", "{\"k\":\"abcdefghijklmnop\x01q\"}", 0) == OUTBOX_EINVAL && error_names("control"),
          "track: a raw control character after 16 plain bytes");
    CHECK(outbox_track(e, "a", "{\"k\":\"abcdefghijklmnopqrstuvw\xF0\x9F\x98\x80xyz\xED\xA0\x80\"}", 0) == OUTBOX_EINVAL &&
          error_names("UTF-8"), "track: an encoded surrogate after valid text");
    CHECK(outbox_track(e, "a", "{\"abcdefghijklmnopq\":\"abcdefgh\\\"ijklmnopqrst\xC3\xA9\"}", 0) == 0,
          "track: long key, escape and non-ASCII after plain bytes");
    CHECK(outbox_track(e, "a", NULL, 4) == OUTBOX_EINVAL, "track: unknown flag");
    CHECK(outbox_track(e, "a", "{\"s\":\"\\u00e9\\ud83d\\ude00\",\"n\":-0.5e1,\"i\":-9223372036854775808,\"b\":true}", 0) == 0,
          "track: every kind of value");
    CHECK(outbox_track(e, "b", " { } ", OUTBOX_CRITICAL) == 0, "track: an empty object, critical");
    {
        /* More properties than fit the parser's stack buffer: all take part in the key order, 20 are kept. */
        char many[2048];
        size_t used = (size_t)snprintf(many, sizeof many, "{");
        for (int i = 0; i < 40; i++)
            used += (size_t)snprintf(many + used, sizeof many - used, "%s\"k%02d\":%d", i ? "," : "", 39 - i, i);
        snprintf(many + used, sizeof many - used, "}");
        CHECK(outbox_track(e, "a", many, 0) == 0, "track: 40 properties");
        many[used] = ',';
        snprintf(many + used + 1, sizeof many - used - 1, "\"k07\":1}");
        CHECK(outbox_track(e, "a", many, 0) == OUTBOX_EINVAL && error_names("k07"), "track: a duplicate among 41");
    }
    CHECK(outbox_track(e, "c", NULL, 0) == OUTBOX_ELIMIT, "track: a third name beyond maxDistinctEventNames 2");
    CHECK(outbox_update(e, NULL) == OUTBOX_EINVAL, "update: NULL");
    CHECK(outbox_update(e, "{\"appSecret\":") == OUTBOX_EINVAL, "update: malformed");
    CHECK(outbox_update(e, "{\"storePath\":\"/tmp/y\"}") == OUTBOX_ECONFIG && error_names("storePath"),
          "update: a key fixed at start, by name");
    CHECK(outbox_update(e, "{\"nope\":1}") == OUTBOX_ECONFIG && error_names("nope"), "update: unknown key");
    CHECK(outbox_update(e, "{\"endpoint\":\"ftp://x\"}") == OUTBOX_ECONFIG && error_names("endpoint"),
          "update: out of bounds");
    CHECK(outbox_update(e, "{\"requestTimeoutMs\":true}") == OUTBOX_EINVAL, "update: wrong type");
    CHECK(outbox_update(e, "{\"appSecret\":\"t\",\"requestTimeoutMs\":5000}") == 0, "update: valid");
    CHECK(outbox_close(e, -1) == OUTBOX_EINVAL, "close: negative drain");
    int rc = outbox_close(e, 0);
    CHECK(rc == 0 || rc == OUTBOX_ETIMEDOUT, "close with logs undeliverable: %d", rc);
    CHECK(outbox_track(e, "a", NULL, 0) == OUTBOX_ECLOSED, "track after close");
    CHECK(outbox_dispatch(e, NULL, NULL) == OUTBOX_ECLOSED, "dispatch after close");
    CHECK(outbox_status(e) == NULL && error_names("closed"), "status after close");
    CHECK(outbox_set_enabled(e, 0) == OUTBOX_ECLOSED, "set_enabled after close");
    CHECK(outbox_update(e, "{}") == OUTBOX_ECLOSED, "update after close");
    CHECK(outbox_close(e, 0) == OUTBOX_ECLOSED, "close twice");
    outbox_free(e);

    /* The store outlives the engine: reopening finds the two logs the closed engine could not deliver. */
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"sessionTracking\":\"manual\"}", path);
    e = outbox_open(config, NULL);
    CHECK(e != NULL, "reopen");
    if (e) {
        char *status = outbox_status(e);
        CHECK(status && strstr(status, "\"pending_normal\":3,\"pending_critical\":1"), "kept: %s", status ? status : "");
        outbox_free(status);
        CHECK(outbox_close(e, 0) == 0, "close a store-only engine");
        outbox_free(e);
    }
    /* Freeing an open engine closes it first. */
    e = outbox_open(config, NULL);
    CHECK(e != NULL, "open again");
    outbox_free(e);
}

/* ---- (d) opt-out ---- */

static void test_opt_out(void) {
    struct mock m;
    CHECK(mock_start(&m, NULL, NULL) == 0, "outbox-mock starts");
    outbox_engine *e = open_manual(&m, "optout", "s");
    if (!e) { mock_stop(&m); return; }
    for (int i = 0; i < 20; i++) CHECK(outbox_track(e, "before", NULL, 0) == 0, "track");
    CHECK(drain(e) == OUTBOX_DISPATCH_NO_DATA, "drained");
    CHECK(mock_stat(&m, "logs_unique") == 20, "20 delivered before the opt-out");
    CHECK(outbox_set_enabled(e, 0) == 0, "opt out");
    CHECK(outbox_track(e, "after", NULL, 0) == OUTBOX_EDISABLED, "tracking while opted out");
    CHECK(outbox_track(e, "after", NULL, OUTBOX_CRITICAL) == OUTBOX_EDISABLED, "critical too");
    int result = dispatch_and_wait(e);
    CHECK(result == OUTBOX_DISPATCH_NO_DATA || result == OUTBOX_DISPATCH_ERROR, "dispatch while opted out: %d", result);
    sleep_ms(300);
    CHECK(mock_stat(&m, "logs_unique") == 20, "nothing more arrived");
    CHECK(mock_stat(&m, "requests") >= 1, "requests");
    char *status = outbox_status(e);
    CHECK(status && strstr(status, "\"enabled\":false"), "status says disabled: %s", status ? status : "");
    outbox_free(status);
    CHECK(outbox_close(e, 500) == 0, "close");
    outbox_free(e);
    mock_stop(&m);
}

/* ---- (e) outbox_update resumes after a 401 ---- */

static void test_update_after_401(void) {
    struct mock m;
    CHECK(mock_start(&m, "--app-secret", "right") == 0, "outbox-mock --app-secret starts");
    outbox_engine *e = open_manual(&m, "401", "wrong");
    if (!e) { mock_stop(&m); return; }
    for (int i = 0; i < 5; i++) CHECK(outbox_track(e, "secret", NULL, 0) == 0, "track");
    CHECK(dispatch_and_wait(e) == OUTBOX_DISPATCH_ERROR, "a 401 is an error");
    CHECK(mock_stat(&m, "logs_unique") == 0, "nothing accepted with the wrong secret");
    char *status = outbox_status(e);
    CHECK(status && strstr(status, "\"pending_normal\":5") && !strstr(status, "\"disabled_reason\":null"),
          "stopped, logs kept: %s", status ? status : "");
    outbox_free(status);
    CHECK(outbox_update(e, "{\"appSecret\":\"right\"}") == 0, "update the secret");
    CHECK(drain(e) == OUTBOX_DISPATCH_NO_DATA, "drained after the update");
    CHECK(mock_stat(&m, "logs_unique") == 5, "all 5 delivered after the update");
    /* SPEC D1, R8: the destination and the headers change at run time; status names the destination of the last
       send and server_rejected. */
    CHECK(outbox_update(e, "{\"destination\":\"appcenter\",\"headers\":{\"X-Tenant\":\"acme\"}}") == 0,
          "update the destination and the headers");
    CHECK(outbox_update(e, "{\"destination\":\"kafka\"}") == OUTBOX_ECONFIG && error_names("appcenter"),
          "update: an unknown destination is refused");
    status = outbox_status(e);
    CHECK(status && strstr(status, "\"destination\":\"appcenter\"") && strstr(status, "\"server_rejected\":0"),
          "status names the destination: %s", status ? status : "");
    outbox_free(status);
    CHECK(outbox_close(e, 500) == 0, "close");
    outbox_free(e);
    mock_stop(&m);
}

/* ---- (f) the analytics model (SPEC E5) ---- */

/* The first recorded log (/_mock/logs answers one JSON object per line) that contains `needle`, copied into out;
   0 when found. */
static int find_log(const char *logs, const char *needle, char *out, size_t size) {
    for (const char *line = logs; *line;) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        if (memmem(line, length, needle, strlen(needle))) {
            if (length >= size) length = size - 1;
            memcpy(out, line, length);
            out[length] = '\0';
            return 0;
        }
        line += length + (end ? 1 : 0);
    }
    out[0] = '\0';
    return -1;
}

struct timer_end { outbox_engine *e; int64_t timer; int result; };

static void *end_timer_elsewhere(void *arg) {
    struct timer_end *t = arg;
    t->result = outbox_end_timer(t->e, t->timer, "{\"asset\":\"level-2\"}", 0);
    return NULL;
}

static void test_model(void) {
    struct mock m;
    CHECK(mock_start(&m, NULL, NULL) == 0, "outbox-mock starts");
    outbox_engine *e = open_manual(&m, "model", "s");
    if (!e) { mock_stop(&m); return; }

    CHECK(outbox_end_session(e) == OUTBOX_EINVAL && error_names("no session"), "ending a session before any");
    CHECK(outbox_start_session(e) == 0, "start a session");
    CHECK(outbox_track_screen(e, "Player", "/player/42", "{\"source\":\"search\"}") == 0, "a screen");
    CHECK(outbox_track_category(e, "Video>Music>Play", "clip-42", 61500, NULL, 0) == 0, "a categorised event");
    CHECK(outbox_set_user_id(e, "u-1842") == 0, "set the user id");
    CHECK(outbox_set_user_properties(e, "{\"plan\":\"pro\",\"seats\":3}") == 0, "user properties");
    CHECK(outbox_identify(e, "u-1843", "{\"company\":\"acme\"}") == 0, "identify");
    int64_t timer = outbox_start_timer(e, "load");
    CHECK(timer > 0, "a timer starts: %lld", (long long)timer);
    CHECK(outbox_pause_timer(e, timer) == 0 && outbox_resume_timer(e, timer) == 0, "pause and resume it");
    sleep_ms(30); /* the timer must measure a duration: this is what it times, not a wait for the engine */
    struct timer_end ending = {e, timer, -99};
    pthread_t thread;
    pthread_create(&thread, NULL, end_timer_elsewhere, &ending);
    pthread_join(thread, NULL);
    CHECK(ending.result == 0, "the timer ends from another thread");
    CHECK(outbox_end_timer(e, timer, NULL, 0) == OUTBOX_EINVAL && error_names("not open"), "an ended timer");
    CHECK(outbox_pause_timer(e, 987654) == OUTBOX_EINVAL, "an unknown timer");
    int64_t second = outbox_start_timer(e, "buffer");
    CHECK(second > timer && outbox_end_timer_named(e, "buffer", NULL, 0) == 0, "a timer ended by its name");
    CHECK(outbox_end_timer(e, second, NULL, 0) == OUTBOX_EINVAL, "that one is ended too");
    CHECK(outbox_send_location(e, 41.0082, 28.9784, 12.5) == 0, "a location");
    CHECK(outbox_enter_background(e) == 0 && outbox_enter_foreground(e) == 0, "background and back");
    CHECK(outbox_set_reachability(e, OUTBOX_ONLINE) == 0, "the host says online");
    CHECK(outbox_end_session(e) == 0, "end the session");
    CHECK(outbox_end_session(e) == OUTBOX_EINVAL && error_names("no session"), "ending it again");

    /* Bad input: a code and a message, never a crash. */
    CHECK(outbox_track_screen(e, NULL, NULL, NULL) == OUTBOX_EINVAL && error_names("screen name"), "a NULL screen");
    CHECK(outbox_track_screen(e, "\xff\xfe", NULL, NULL) == OUTBOX_EINVAL && error_names("UTF-8"), "invalid UTF-8");
    CHECK(outbox_track_screen(e, "S", NULL, "{\"a\":[1]}") == OUTBOX_EINVAL, "nested properties");
    CHECK(outbox_send_location(e, 0.0 / 0.0, 1, -1) == OUTBOX_EINVAL, "a NaN latitude");
    CHECK(outbox_send_location(e, 91, 1, -1) == OUTBOX_EINVAL, "a latitude out of range");
    CHECK(outbox_track_category(e, "A>B", NULL, 0.0 / 0.0, NULL, 0) == OUTBOX_EINVAL, "a NaN duration");
    CHECK(outbox_track_category(e, "A>B", NULL, -1, NULL, 8) == OUTBOX_EINVAL && error_names("flags"), "bad flags");
    CHECK(outbox_set_user_properties(e, NULL) == OUTBOX_EINVAL, "NULL user properties");
    CHECK(outbox_set_user_properties(e, "{}") == OUTBOX_EINVAL, "no user properties");
    CHECK(outbox_identify(e, NULL, NULL) == OUTBOX_EINVAL && error_names("user id"), "identify without a user");
    CHECK(outbox_set_user_id(e, "") == OUTBOX_EINVAL, "an empty user id");
    CHECK(outbox_set_reachability(e, 7) == OUTBOX_EINVAL && error_names("OUTBOX_ONLINE"), "unknown reachability");
    CHECK(outbox_start_timer(e, NULL) == OUTBOX_EINVAL, "a timer without a name");
    CHECK(outbox_start_session(NULL) == OUTBOX_EINVAL, "a NULL engine");

    CHECK(drain(e) == OUTBOX_DISPATCH_NO_DATA, "drained");
    static struct buffer logs;
    CHECK(mock_get(&m, "/_mock/logs", &logs) == 0, "GET /_mock/logs");
    char log[4096];
    CHECK(strstr(logs.data, "\"type\":\"startSession\"") != NULL, "a startSession log");
    CHECK(find_log(logs.data, "\"type\":\"screen\"", log, sizeof log) == 0 && strstr(log, "\"name\":\"Player\"")
              && strstr(log, "/player/42") && strstr(log, "search"),
          "the screen with its path and property: %s", log);
    CHECK(find_log(logs.data, "\"name\":\"Video>Music>Play\"", log, sizeof log) == 0 && strstr(log, "clip-42")
              && strstr(log, "$event_duration") && strstr(log, "61500"),
          "the categorised event with its value and duration: %s", log);
    CHECK(find_log(logs.data, "\"type\":\"userProperties\"", log, sizeof log) == 0 && strstr(log, "\"plan\"")
              && strstr(log, "u-1842"),
          "user properties under the user id: %s", log);
    CHECK(find_log(logs.data, "\"company\"", log, sizeof log) == 0 && strstr(log, "u-1843"),
          "identify's traits under the new user (App Center's wire: a userProperties log): %s", log);
    CHECK(find_log(logs.data, "\"name\":\"load\"", log, sizeof log) == 0 && strstr(log, "$event_duration")
              && strstr(log, "level-2"),
          "the timer's event with its duration: %s", log);
    /* The duration is at least the 30 ms it ran. */
    const char *duration = strstr(log, "$event_duration");
    const char *value = duration ? strstr(duration, "\"value\":") : NULL;
    CHECK(value && strtod(value + 8, NULL) >= 30.0, "the timer measured at least 30 ms: %s", value ? value : "");
    CHECK(find_log(logs.data, "\"type\":\"location\"", log, sizeof log) == 0 && strstr(log, "41.0082"),
          "the location: %s", log);
    CHECK(find_log(logs.data, "\"type\":\"endSession\"", log, sizeof log) == 0 && strstr(log, "durationMs"),
          "the endSession with its duration: %s", log);
    CHECK(outbox_close(e, 500) == 0, "close");
    outbox_free(e);
    mock_stop(&m);
}

/* ---- SPEC H1: the before-store hook ---- */

struct hook_state {
    int calls;
    char last[1024];
    char buffer[256]; /* the host's memory for replacements: the engine copies it before the call returns */
};

static int before_store(const char *event_json, void *user, const char **replacement_json) {
    struct hook_state *state = user;
    state->calls++;
    snprintf(state->last, sizeof state->last, "%s", event_json);
    if (strstr(event_json, "\"name\":\"debug.")) return OUTBOX_HOOK_DROP;
    if (strstr(event_json, "\"name\":\"signup\"")) {
        /* Renamed, the e-mail removed, a property added; written into the host's buffer, overwritten next time. */
        snprintf(state->buffer, sizeof state->buffer, "{\"name\":\"sign_up\",\"properties\":{\"plan\":\"pro\",\"n\":2}}");
        *replacement_json = state->buffer;
        return OUTBOX_HOOK_STORE;
    }
    if (strstr(event_json, "\"name\":\"nested\"")) { *replacement_json = "{\"name\":\"x\",\"properties\":{\"a\":[1]}}"; return 0; }
    if (strstr(event_json, "\"name\":\"unnamed\"")) { *replacement_json = "{\"name\":\"\"}"; return 0; }
    if (strstr(event_json, "\"name\":\"garbage\"")) { *replacement_json = "{\"name\":\"g\"} trailing"; return 0; }
    if (strstr(event_json, "\"name\":\"weird\"")) return 7;
    return OUTBOX_HOOK_STORE;
}

/* Whether `needle` occurs anywhere in the file at `path` (a missing file holds nothing): `strings` in C. */
static int file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char data[1 << 22];
    size_t size = fread(data, 1, sizeof data, f);
    fclose(f);
    return memmem(data, size, needle, strlen(needle)) != NULL;
}

static void test_before_store(void) {
    char path[512], config[1024], wal[600];
    store_path(path, sizeof path, "hook");
    snprintf(config, sizeof config, "{\"storePath\":\"%s\",\"sessionTracking\":\"manual\"}", path);
    outbox_engine *e = outbox_open(config, NULL);
    CHECK(e != NULL, "outbox_open (hook)");
    if (!e) return;
    struct hook_state state = {0};
    CHECK(outbox_set_before_store(NULL, before_store, &state) == OUTBOX_EINVAL, "a NULL engine");
    CHECK(outbox_set_before_store(e, before_store, &state) == 0, "outbox_set_before_store");

    CHECK(outbox_track(e, "signup", "{\"email\":\"c-secret@example.com\",\"plan\":\"free\"}", OUTBOX_CRITICAL) == 0,
          "an event the hook rewrites");
    CHECK(strstr(state.last, "\"name\":\"signup\"") && strstr(state.last, "\"email\":\"c-secret@example.com\""),
          "the hook saw the call's name and properties: %s", state.last);
    memset(state.buffer, 'x', sizeof state.buffer - 1); /* the host reuses its buffer: the engine has its copy */
    CHECK(outbox_track(e, "debug.noise", "{\"token\":\"c-dropped-value\"}", OUTBOX_CRITICAL) == 0,
          "a dropped event is no error");
    int64_t timer = outbox_start_timer(e, "debug.timer");
    CHECK(timer > 0 && outbox_end_timer(e, timer, NULL, 0) == 0, "a timer's end passes through the hook (dropped)");
    CHECK(strstr(state.last, "$event_duration"), "the hook saw the timer's duration: %s", state.last);
    CHECK(outbox_track_category(e, "Video>Play", "clip", -1, NULL, OUTBOX_CRITICAL) == 0, "a categorised event");
    CHECK(strstr(state.last, "\"$event_value\":\"clip\""), "the hook saw the categorised event's value: %s", state.last);
    CHECK(outbox_track_screen(e, "debug.screen", NULL, NULL) == 0 && strstr(state.last, "Video>Play"),
          "a screen does not pass through the hook");

    /* What the hook returns is checked as outbox_track's arguments are; a refusal is the call's error. */
    CHECK(outbox_track(e, "nested", NULL, 0) == OUTBOX_EINVAL && error_names("not nested"), "a nested replacement");
    CHECK(outbox_track(e, "unnamed", NULL, 0) == OUTBOX_EINVAL && error_names("empty"), "a replacement without a name (T2)");
    CHECK(outbox_track(e, "garbage", NULL, 0) == OUTBOX_EINVAL && error_names("after the object"), "trailing text");
    CHECK(outbox_track(e, "weird", NULL, 0) == OUTBOX_EINVAL && error_names("returned 7"), "an unknown answer");

    char *status = outbox_status(e);
    CHECK(status && strstr(status, "\"dropped_by_policy\":2") && strstr(status, "\"pending_critical\":2"),
          "two dropped, two stored: %s", status ? status : "NULL");
    outbox_free(status);
    CHECK(outbox_set_before_store(e, NULL, NULL) == 0, "the hook removed");
    int calls = state.calls;
    CHECK(outbox_track(e, "debug.kept", NULL, OUTBOX_CRITICAL) == 0 && state.calls == calls, "without a hook, stored");
    status = outbox_status(e);
    CHECK(status && strstr(status, "\"pending_critical\":3"), "stored: %s", status ? status : "NULL");
    outbox_free(status);
    CHECK(outbox_close(e, 0) == 0, "close");
    outbox_free(e);

    snprintf(wal, sizeof wal, "%s-wal", path);
    CHECK(file_contains(path, "sign_up") || file_contains(wal, "sign_up"), "the renamed event is in the store");
    CHECK(!file_contains(path, "c-secret") && !file_contains(wal, "c-secret"), "the removed e-mail is not");
    CHECK(!file_contains(path, "c-dropped-value") && !file_contains(wal, "c-dropped-value"), "nor the dropped event");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-outbox-mock\n", argv[0]);
        return 2;
    }
    mock_binary = argv[1];
    signal(SIGPIPE, SIG_IGN);
    alarm(120); /* a hang is a failure, not a stuck build */
    snprintf(temp_dir, sizeof temp_dir, "/tmp/outbox-c-test-XXXXXX");
    if (!mkdtemp(temp_dir)) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    outbox_set_log_handler(on_log, NULL);

    test_bad_input();
    test_destinations();
    test_policies();
    test_close_from_the_log_handler();
    test_host_loop();
    test_host_loop_dispatch_commits_first();
    test_host_loop_dispatch_holds_the_loop();
    test_own_thread();
    test_opt_out();
    test_update_after_401();
    test_model();
    test_sealed_store();
    test_before_store();

    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
    curl_global_cleanup();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
