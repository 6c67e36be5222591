/*
 * outbox.h — the C interface of Outbox, an offline-first analytics sync engine (SPEC section E).
 *
 * Link with `pkg-config --cflags --libs outbox` (libOutbox.so.0). The library records events durably in a
 * SQLite store and delivers them in batches over HTTP; it runs its libuv loop on a thread of its own, or on
 * the caller's `uv_loop_t`.
 *
 *     outbox_engine *e = outbox_open("{\"storePath\":\"/var/lib/app/analytics.outbox\","
 *                                    "\"endpoint\":\"https://in.example.com\",\"appSecret\":\"…\"}", NULL);
 *     if (!e) { fprintf(stderr, "outbox: %s\n", outbox_last_error()); return 1; }
 *     outbox_track(e, "signup", "{\"plan\":\"pro\",\"seats\":3,\"trial\":true}", 0);
 *     outbox_close(e, 5000);   // sends what it can within 5 s; the rest stays stored for the next start
 *     outbox_free(e);
 *
 * Results. Every function returning `int` returns 0 on success or a negative OUTBOX_E… code; the reason, in
 * words, is then `outbox_last_error()` on the same thread. No function of this header aborts the process on
 * bad input: NULL pointers, invalid UTF-8, malformed JSON, wrong types and a closed engine are errors.
 *
 * Threads. Every function may be called from any thread, at the same time, except:
 *   - `outbox_open` and `outbox_close` with a caller's loop: on the thread that runs that loop;
 *   - `outbox_close` in own-thread mode: not from inside a `done` callback (it would wait for the thread that
 *     runs it: OUTBOX_EINVAL);
 *   - `outbox_set_log_handler`: before the first `outbox_open`;
 *   - `outbox_free(engine)`: once, after `outbox_close` returned, when no other thread uses the handle.
 * Callbacks (`done`, the log handler) run on the engine's loop thread (the caller's loop thread in host mode) and
 * must return quickly; the before-store hook runs on the thread that tracks. With a caller's loop, `done` may call `outbox_close` on its engine: it returns at once and
 * the engine stops after `done` returned. From the log handler `outbox_close` is OUTBOX_EINVAL in both modes.
 *
 * Strings. `outbox_status` returns a string the caller owns and frees with `outbox_free`. `outbox_last_error`
 * and `outbox_version` return strings the library owns: never free them.
 */
#ifndef OUTBOX_H
#define OUTBOX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release (VERSION in the source tree); outbox_version() returns the library's own. */
#define OUTBOX_VERSION_MAJOR 0
#define OUTBOX_VERSION_MINOR 2
#define OUTBOX_VERSION_PATCH 0

/* An engine: one SQLite store and, with an endpoint, its delivery. Opaque. */
typedef struct outbox_engine outbox_engine;

/* Error codes (negative results). */
#define OUTBOX_EINVAL (-1)    /* a NULL argument, invalid UTF-8, malformed JSON, a value of the wrong type */
#define OUTBOX_ECONFIG (-2)   /* a configuration key unknown, missing, out of bounds or fixed at start: named */
#define OUTBOX_ECLOSED (-3)   /* the engine was closed by outbox_close (a second close too) */
#define OUTBOX_EFULL (-4)     /* SPEC S3: storage is full of critical logs; this normal log was not stored */
#define OUTBOX_ELIMIT (-5)    /* SPEC T4: a new event name beyond maxDistinctEventNames; not stored */
#define OUTBOX_EDISABLED (-6) /* tracking while opted out (outbox_set_enabled(e, 0)); nothing stored */
#define OUTBOX_ETIMEDOUT (-7) /* own-thread outbox_close: the drain ended with logs still stored (kept) */

/* Flags of outbox_track. */
#define OUTBOX_CRITICAL 1     /* committed to disk before outbox_track returns; sent first, evicted last */

/* Results passed to an outbox_dispatch callback (SPEC C7). */
#define OUTBOX_DISPATCH_GOOD 0    /* the first request this dispatch started was acknowledged */
#define OUTBOX_DISPATCH_NO_DATA 1 /* nothing was waiting: the store is drained */
#define OUTBOX_DISPATCH_ERROR 2   /* that request failed (it will be retried), or delivery is off or closing */

/* Log levels of the log handler (swift-log's, in order). */
#define OUTBOX_LOG_TRACE 0
#define OUTBOX_LOG_DEBUG 1
#define OUTBOX_LOG_INFO 2
#define OUTBOX_LOG_NOTICE 3
#define OUTBOX_LOG_WARNING 4
#define OUTBOX_LOG_ERROR 5
#define OUTBOX_LOG_CRITICAL 6

/*
 * Opens (or creates) the store and starts the engine. Returns NULL on failure (outbox_last_error says why; the
 * failing code is OUTBOX_EINVAL for malformed JSON and OUTBOX_ECONFIG for a bad key, and shows in the message).
 *
 * config_json: one JSON object whose keys are the fields of the Swift `Configuration`:
 *   "storePath" (string, required)        "maxStorageSize" (bytes)       "maxLogCount" (integer or null)
 *   "maxLogAgeMs"                         "maxDistinctEventNames"        "groupCommitWindowMs"
 *   "intakeCapacity"                      "endpoint" (string or null: store only)
 *   "appSecret"                           "batchSize"                    "transmissionIntervalMs"
 *   "destination" ("appcenter", "otlp")   "otlpEncoding" ("protobuf", "json"; with "otlp" only)
 *   "headers" (an object of strings: a header name and its value each, sent with every request)
 *   "criticalTransmissionIntervalMs"      "retryIntervalsMs" (array)     "maxRetryAfterMs"
 *   "probeIntervalMs" (or null)           "dispatchIntervalMs" (or null: automatic; <= 0: manual)
 *   "requestTimeoutMs"                    "caFile" (or null)             "bodyCompression" ("fast", "zlib:1"…"zlib:9")
 *   "clientCertificate", "clientKey", "pinnedPublicKey" (SPEC K2: PEM paths; curl's "sha256//..." pins; or null)
 *   "storeKeyFile" (SPEC K1: a file of 32 raw bytes or 64 hex digits, mode 0600, that seals the store; or null)
 *   "clockSkewThresholdMs"                "watchesNetwork" (boolean)     "appVersion", "appBuild", "appNamespace"
 *   "sessionTimeoutMs"                    "sessionTracking" ("automatic" or "manual")
 *   "tracksAppLifecycle" (boolean)        "testingAllowsValuesBelowBounds" (boolean)
 *   "logLevel" ("trace", "debug", "info", "notice", "warning" (default), "error", "critical")
 *   "destinations" (SPEC D15: several destinations from one store, an array of objects, each "name" ([a-z0-9_-],
 *     1-32 characters, unique also once '-' is read as '_'; the first may go without: "default") and that
 *     destination's own keys: "destination", "endpoint", its credentials, "headers", "otlpEncoding",
 *     "segmentProfile", the TLS keys; not beside the single destination's keys)
 * Durations are integers of milliseconds, sizes integers of bytes. An unknown key is refused by name.
 *
 * uv_loop: NULL runs the engine on a thread of its own ("outbox-loop"). A `uv_loop_t *` runs it on that loop:
 * call outbox_open on the thread that runs it. The engine's timers, sockets and watchers are unref'd, so an idle
 * engine never keeps the loop alive; a pending outbox_dispatch or outbox_close holds it as a pending libuv request
 * does, until its work is done (SPEC C7).
 *
 * Thread: any (own-thread mode); the loop's thread (caller's loop).
 */
outbox_engine *outbox_open(const char *config_json, void *uv_loop);

/*
 * Records an event (SPEC T1–T5). name: UTF-8, 1–256 characters (longer ones are cut, with a warning).
 * properties_json: NULL, or a flat JSON object of strings, numbers and booleans: integers are stored as 64-bit
 * integers, other numbers as doubles; at most 20 properties are kept (the first 20 in key order). A nested
 * object or array, null, or a duplicate key is OUTBOX_EINVAL. flags: 0, or OUTBOX_CRITICAL to return only once
 * the log is on disk. Without OUTBOX_CRITICAL the call never waits for the disk or the network, only (briefly)
 * when the engine's intake queue is full.
 *
 * Returns 0, OUTBOX_EINVAL, OUTBOX_ECLOSED, OUTBOX_EFULL, OUTBOX_ELIMIT, OUTBOX_EDISABLED (opted out: nothing is
 * stored), or for a critical log any storage error as OUTBOX_EINVAL with the reason. Thread: any.
 */
int outbox_track(outbox_engine *engine, const char *name, const char *properties_json, int flags);

/*
 * The analytics model (SPEC E5): what a Swift host's OutboxEngine does, with outbox_track's rules for strings and
 * properties (UTF-8; a flat JSON object or NULL), codes and threads: every function below may be called from any
 * thread. Each returns 0 or a negative OUTBOX_E… code with the reason in outbox_last_error().
 */

/* Reachability for outbox_set_reachability. */
#define OUTBOX_OFFLINE 0        /* the host knows the network is down: nothing is sent until ONLINE (SPEC N2) */
#define OUTBOX_ONLINE 1         /* the host knows it is up: sending resumes at once */
#define OUTBOX_WATCH_NETWORK (-1) /* the host has no opinion: the engine's own watcher decides again */

/* Sessions (SPEC A2, A3): start one (every call starts a new one; with "sessionTracking":"manual" the only way)
 * and end the current one with its duration. outbox_end_session with no session open is OUTBOX_EINVAL. */
int outbox_start_session(outbox_engine *engine);
int outbox_end_session(outbox_engine *engine);

/* The app went to the background / came back (SPEC A1, A4, A5): timers and open screens pause; back after more
 * than "sessionTimeoutMs" away, automatic tracking starts a new session. Repeated calls are ignored. */
int outbox_enter_background(outbox_engine *engine);
int outbox_enter_foreground(outbox_engine *engine);

/* A screen view (SPEC A6): name (1–256 characters; longer is cut, with a warning), path (NULL: none),
 * properties_json (NULL: none). */
int outbox_track_screen(outbox_engine *engine, const char *name, const char *path, const char *properties_json);

/* A categorised event (SPEC A7, Curio's sendEvent): name "Cat1>Cat2>Cat3" is also sent as its category path;
 * value (NULL: none) as "$event_value"; duration_ms >= 0 as "$event_duration" (negative: none; NaN is
 * OUTBOX_EINVAL). properties_json and flags as outbox_track's. */
int outbox_track_category(outbox_engine *engine, const char *name, const char *value, double duration_ms,
                          const char *properties_json, int flags);

/* The signed-in user (SPEC A8): user_id 1–256 characters, sent on every later log and kept across restarts;
 * NULL signs out. */
int outbox_set_user_id(outbox_engine *engine, const char *user_id);

/* The user's properties (SPEC A8): a userProperties log of 1–20 properties (properties_json not NULL). */
int outbox_set_user_properties(outbox_engine *engine, const char *properties_json);

/* The user signed in (SPEC A8a): sets user_id as outbox_set_user_id does and sends an identify log with the
 * traits (NULL: none) that links the anonymous install to the user. */
int outbox_identify(outbox_engine *engine, const char *user_id, const char *traits_json);

/* Duration timers on the boot clock (SPEC A4): outbox_start_timer returns a timer number > 0 (or a negative
 * OUTBOX_E… code); pause and resume it; end it to track the event `name` with "$event_duration" in ms.
 * outbox_end_timer_named ends the most recent timer of that name (with none, the event goes without a
 * duration). A number unknown or already ended is OUTBOX_EINVAL. Background stretches are not counted. */
int64_t outbox_start_timer(outbox_engine *engine, const char *name);
int outbox_pause_timer(outbox_engine *engine, int64_t timer);
int outbox_resume_timer(outbox_engine *engine, int64_t timer);
int outbox_end_timer(outbox_engine *engine, int64_t timer, const char *properties_json, int flags);
int outbox_end_timer_named(outbox_engine *engine, const char *name, const char *properties_json, int flags);

/* A location log (SPEC A8, Curio's sendLocation): latitude −90…90, longitude −180…180, accuracy_m in metres
 * (negative: none). NaN or out-of-range coordinates are OUTBOX_EINVAL. */
int outbox_send_location(outbox_engine *engine, double latitude, double longitude, double accuracy_m);

/* The host's word on reachability (SPEC N2): OUTBOX_ONLINE, OUTBOX_OFFLINE or OUTBOX_WATCH_NETWORK. */
int outbox_set_reachability(outbox_engine *engine, int reachability);

/*
 * Sends everything waiting now, whatever the dispatch mode (SPEC C7). `done` (may be NULL) is called exactly once,
 * on the loop thread, with OUTBOX_DISPATCH_GOOD, _NO_DATA or _ERROR for the first request this dispatch started;
 * call again until _NO_DATA to drain. If the engine is closed before the answer, `done` receives _ERROR.
 * With a caller's loop the dispatch holds that loop as a pending libuv request does: `uv_run` returns only after
 * `done` has run (with `done` NULL, once the requests it started have finished); no handle of your own is needed.
 * Returns 0 or OUTBOX_EINVAL / OUTBOX_ECLOSED (then `done` is never called). Thread: any.
 */
int outbox_dispatch(outbox_engine *engine, void (*done)(int result, void *ctx), void *ctx);

/*
 * The engine's state as one JSON object (SPEC X4): "pending_normal", "pending_critical", "in_flight", "bytes",
 * "oldest_age_s", "dead_letters", "enabled", "disabled_reason", "install_id", and what this engine did since it
 * started: "stored", "evicted", "rejected", "expired", "delivered", "dead_lettered", "retries", "requests",
 * "dropped_by_policy" (events the before-store hook dropped), "skipped" (logs a destination's policy settled without
 * sending: "include", "exclude", "sample" — keys of the configuration, at the top level or in a "destinations"
 * element, with "redact"; BEHAVIOUR H2–H4).
 * pending_* count every log whose outbox_track returned. The caller frees the string with outbox_free.
 * NULL on failure (a NULL or closed engine). Thread: any; in host mode from another thread it waits for the
 * loop's next turn, so the loop must be running.
 */
char *outbox_status(outbox_engine *engine);

/*
 * SPEC T6 opt-out, persisted across restarts: 0 deletes the stored logs, stops delivery at once and makes later
 * outbox_track calls return OUTBOX_EDISABLED; non-zero collects again. Returns 0, OUTBOX_EINVAL, OUTBOX_ECLOSED.
 * Thread: any.
 */
int outbox_set_enabled(outbox_engine *engine, int enabled);

/*
 * SPEC R8: changes settings of a running engine. config_json holds only the keys to change, among "endpoint",
 * "appSecret", "destination", "otlpEncoding", "headers", "caFile", "clientCertificate", "clientKey", "pinnedPublicKey",
 * "storeKeyFile" (a new key: the store is sealed again under it, a few rows at a time; it cannot be removed) and
 * "requestTimeoutMs"; any other key (including "storePath") is refused by name with
 * OUTBOX_ECONFIG. Validated here; applied on the loop before the next send; a channel stopped by 401, 403, 404
 * or a redirect starts again. Returns 0, OUTBOX_EINVAL, OUTBOX_ECONFIG, OUTBOX_ECLOSED. Thread: any.
 */
int outbox_update(outbox_engine *engine, const char *config_json);

/* What a before-store hook answers. */
#define OUTBOX_HOOK_STORE 0   /* store the event: as it was, or as *replacement_json says */
#define OUTBOX_HOOK_DROP 1    /* drop it: nothing is stored; counted as "dropped_by_policy" in outbox_status */

/*
 * SPEC H1: a hook on every event before it is stored — outbox_track, outbox_track_category and the timers' ends (not
 * screens, user properties, identify traits or locations). It runs on the thread that tracks, inside that call:
 * event_json is {"name":"…","properties":{…}} (valid during the call only), and the hook may rename the event, change
 * or remove properties (what it removes never reaches the disk) or drop it. To store the event as it was, return
 * OUTBOX_HOOK_STORE and leave *replacement_json NULL; to store something else, point *replacement_json at a JSON of
 * the same form ("properties" may be left out): the engine reads and copies it before the tracking call returns and
 * never frees it — the memory stays the host's (a buffer reused by each call of the thread will do). The replacement
 * is checked as outbox_track checks its arguments (T2–T4: a bad name or property, malformed JSON, a new name beyond
 * maxDistinctEventNames), and so is any other return value: the tracking call then fails with that code and stores
 * nothing. The hook must not track on its engine (it would run again) nor close it. NULL removes the hook; a call
 * already running on another thread may still finish with the previous one, so free what `user` points to only when
 * none can be. Returns 0, OUTBOX_EINVAL, OUTBOX_ECLOSED. Thread: any.
 */
typedef int (*outbox_before_store_fn)(const char *event_json, void *user, const char **replacement_json);
int outbox_set_before_store(outbox_engine *engine, outbox_before_store_fn hook, void *user);

/*
 * SPEC C8: sends what it can within drain_ms, then stops: commits what was tracked, closes the store and every
 * handle. What was not delivered stays stored for the next start. The handle stays valid (later calls with it
 * return OUTBOX_ECLOSED, a second close too) until outbox_free(engine).
 *
 * Own thread (uv_loop NULL): returns once the engine's thread has ended: 0 when everything was delivered (or the
 * engine has no endpoint), OUTBOX_ETIMEDOUT when logs are left stored. Call it from any thread but the engine's.
 * Caller's loop: call it on the loop's thread; it returns 0 at once, and `uv_run` returns by itself at most
 * drain_ms later (plus the close of in-flight transfers), with no handle of the engine left: uv_loop_close then
 * returns 0 if the host closed its own handles.
 * drain_ms < 0 is OUTBOX_EINVAL; 0 closes without waiting for any answer.
 */
int outbox_close(outbox_engine *engine, int drain_ms);

/*
 * Frees a string returned by outbox_status, or an engine after outbox_close. An engine still open is closed first,
 * with drain_ms 0; with a caller's loop that needs the loop's thread, and from another thread the engine is left
 * open and not freed (outbox_last_error says so). NULL is ignored. Thread: any (an engine: once, when no other
 * thread uses it).
 */
void outbox_free(void *pointer);

/* The calling thread's last failure message; "" when none. Never NULL. Owned by the library and valid until this
 * thread's next outbox_ call; never pass it to outbox_free. Thread: any (thread-local). */
const char *outbox_last_error(void);

/* The code (OUTBOX_E…) of the calling thread's last failure; 0 when none. For the functions that return no code,
 * outbox_open above all: NULL with OUTBOX_EINVAL (malformed JSON, a wrong type) or OUTBOX_ECONFIG (a key unknown,
 * missing, out of bounds), or the code of what stopped the engine (a store that cannot be opened: OUTBOX_EINVAL).
 * Thread: any (thread-local). */
int outbox_last_error_code(void);

/* "MAJOR.MINOR.PATCH" of the library loaded (compare with the OUTBOX_VERSION_ macros). Static; never free it. */
const char *outbox_version(void);

/*
 * Where the engine's log lines go, process wide; call before outbox_open (engines opened earlier keep the
 * handler they started with). `fn` receives an OUTBOX_LOG_ level, the line (UTF-8, valid during the call
 * only) and `ctx`, on whichever thread logs (usually the loop thread). NULL restores the default: lines on
 * stderr. Which levels reach it: the "logLevel" key of each engine's configuration.
 */
void outbox_set_log_handler(void (*fn)(int level, const char *message, void *ctx), void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* OUTBOX_H */
