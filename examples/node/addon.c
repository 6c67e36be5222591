/*
 * SPEC E4: a minimal N-API addon that runs an Outbox engine on Node's own libuv loop (napi_get_uv_event_loop):
 * the engine starts no thread of its own; its timers, sockets and async wake-ups are handles on Node's loop,
 * unref'd, so an idle engine never keeps Node alive (a pending dispatch or close does, SPEC C7). Built by
 * `make node-example` with the C compiler and Node's headers (no node-gyp). Every function runs on Node's main
 * thread, the loop's thread, as outbox.h asks of outbox_open and outbox_close in host mode.
 *
 * The addon's functions take the engine first and JSON as strings; examples/node/outbox.js wraps them in an
 * `Engine` class with JavaScript objects (what an application uses: see demo.js):
 *   open(configJSON) -> engine          track(engine, name, propertiesJSON|null, critical) -> undefined
 *   dispatch(engine, callback(result))  status(engine) -> JSON string
 *   setEnabled(engine, enabled)         update(engine, configJSON)
 *   close(engine, drainMs)              free(engine)
 *   startSession(engine)  endSession(engine)  enterBackground(engine)  enterForeground(engine)
 *   trackScreen(engine, name, path|null, propertiesJSON|null)
 *   trackCategory(engine, name, value|null, durationMs (negative: none), propertiesJSON|null, critical)
 *   setUserId(engine, id|null)  setUserProperties(engine, propertiesJSON)  identify(engine, userId, traitsJSON|null)
 *   startTimer(engine, name) -> number  pauseTimer(engine, n)  resumeTimer(engine, n)
 *   endTimer(engine, n, propertiesJSON|null, critical)  endTimerNamed(engine, name, propertiesJSON|null, critical)
 *   sendLocation(engine, latitude, longitude, accuracy (negative: none))  setReachability(engine, 1|0|-1)
 *   setBeforeStore(engine, hook(eventJSON) -> JSON string|null|undefined | null) -> a handle to keep while the hook is set
 * Failures throw an Error whose message is outbox_last_error() and whose `code` is the OUTBOX_E… value; an
 * argument of the wrong JavaScript type throws a TypeError naming the call.
 */
#include <node_api.h>
#include <outbox.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL(env, expr)                                                           \
    do {                                                                          \
        if ((expr) != napi_ok) {                                                  \
            napi_throw_error((env), NULL, "N-API call failed: " #expr);           \
            return NULL;                                                          \
        }                                                                         \
    } while (0)

static napi_value throw_outbox(napi_env env, int code) {
    char text[16];
    snprintf(text, sizeof text, "%d", code);
    napi_throw_error(env, text, outbox_last_error());
    return NULL;
}

/* A JavaScript string as a malloc'd UTF-8 C string (NULL for null/undefined); *ok = 0 on a wrong type. */
static char *string_arg(napi_env env, napi_value value, int *ok) {
    napi_valuetype type;
    *ok = 1;
    if (napi_typeof(env, value, &type) != napi_ok) { *ok = 0; return NULL; }
    if (type == napi_null || type == napi_undefined) return NULL;
    size_t length;
    if (type != napi_string || napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) {
        *ok = 0;
        return NULL;
    }
    char *text = malloc(length + 1);
    if (!text || napi_get_value_string_utf8(env, value, text, length + 1, &length) != napi_ok) {
        free(text);
        *ok = 0;
        return NULL;
    }
    return text;
}

static outbox_engine *engine_arg(napi_env env, napi_value value) {
    void *engine = NULL;
    if (napi_get_value_external(env, value, &engine) != napi_ok) return NULL;
    return engine;
}

static napi_value js_open(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value argv[1];
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    int ok = 1;
    char *config = argc > 0 ? string_arg(env, argv[0], &ok) : NULL;
    struct uv_loop_s *loop;
    CALL(env, napi_get_uv_event_loop(env, &loop));
    outbox_engine *engine = outbox_open(config, loop);
    free(config);
    if (!engine) return throw_outbox(env, ok ? outbox_last_error_code() : OUTBOX_EINVAL);
    napi_value result;
    CALL(env, napi_create_external(env, engine, NULL, NULL, &result));
    return result;
}

static napi_value js_track(napi_env env, napi_callback_info info) {
    size_t argc = 4;
    napi_value argv[4];
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc < 2) { napi_throw_type_error(env, NULL, "track(engine, name, propertiesJSON, critical)"); return NULL; }
    int ok_name, ok_props = 1;
    char *name = string_arg(env, argv[1], &ok_name);
    char *props = argc > 2 ? string_arg(env, argv[2], &ok_props) : NULL;
    bool critical = false;
    if (argc > 3) napi_get_value_bool(env, argv[3], &critical);
    int rc = ok_name && ok_props ? outbox_track(engine_arg(env, argv[0]), name, props, critical ? OUTBOX_CRITICAL : 0)
                                 : OUTBOX_EINVAL;
    free(name);
    free(props);
    if (rc != 0) {
        if (!ok_name || !ok_props) { napi_throw_type_error(env, NULL, "name and properties must be strings"); return NULL; }
        return throw_outbox(env, rc);
    }
    return NULL;
}

/* `done` runs on the loop thread, inside the engine's own callback: the JavaScript callback is called through a
   thread-safe function instead, from a fresh turn of Node's loop with a proper callback scope (microtasks,
   async hooks). The engine holds Node's loop until `done` has run (SPEC C7); the function's own reference holds it
   from there until the JavaScript callback has run. */
static void call_js(napi_env env, napi_value callback, void *context, void *data) {
    (void)context;
    int result = (int)(intptr_t)data;
    if (!env || !callback) return;
    napi_value undefined, argument;
    napi_get_undefined(env, &undefined);
    napi_create_int32(env, result, &argument);
    napi_call_function(env, undefined, callback, 1, &argument, NULL);
}

static void dispatched(int result, void *context) {
    napi_threadsafe_function tsfn = context;
    napi_call_threadsafe_function(tsfn, (void *)(intptr_t)result, napi_tsfn_nonblocking);
    napi_release_threadsafe_function(tsfn, napi_tsfn_release);
}

static napi_value js_dispatch(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2], name;
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc < 2) { napi_throw_type_error(env, NULL, "dispatch(engine, callback)"); return NULL; }
    CALL(env, napi_create_string_utf8(env, "outbox.dispatch", NAPI_AUTO_LENGTH, &name));
    napi_threadsafe_function tsfn;
    CALL(env, napi_create_threadsafe_function(env, argv[1], NULL, name, 0, 1, NULL, NULL, NULL, call_js, &tsfn));
    int rc = outbox_dispatch(engine_arg(env, argv[0]), dispatched, tsfn);
    if (rc != 0) {
        napi_release_threadsafe_function(tsfn, napi_tsfn_abort);
        return throw_outbox(env, rc);
    }
    return NULL;
}

static napi_value js_status(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value argv[1], result;
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    char *status = outbox_status(argc > 0 ? engine_arg(env, argv[0]) : NULL);
    if (!status) return throw_outbox(env, OUTBOX_EINVAL);
    napi_status made = napi_create_string_utf8(env, status, NAPI_AUTO_LENGTH, &result);
    outbox_free(status);
    CALL(env, made);
    return result;
}

/* SPEC T6: opt out (false: stored logs deleted, tracking refused with OUTBOX_EDISABLED) or back in (true). */
static napi_value js_set_enabled(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2];
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    bool enabled = false;
    if (argc < 2 || napi_get_value_bool(env, argv[1], &enabled) != napi_ok) {
        napi_throw_type_error(env, NULL, "setEnabled(engine, enabled): enabled must be true or false");
        return NULL;
    }
    int rc = outbox_set_enabled(engine_arg(env, argv[0]), enabled ? 1 : 0);
    if (rc != 0) return throw_outbox(env, rc);
    return NULL;
}

/* SPEC R8: changes the fields that may change at run time (endpoint, appSecret, caFile, requestTimeoutMs). */
static napi_value js_update(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2];
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    int ok = 0;
    char *config = argc > 1 ? string_arg(env, argv[1], &ok) : NULL;
    if (!ok || !config) {
        free(config);
        napi_throw_type_error(env, NULL, "update(engine, configJSON): configJSON must be a string");
        return NULL;
    }
    int rc = outbox_update(engine_arg(env, argv[0]), config);
    free(config);
    if (rc != 0) return throw_outbox(env, rc);
    return NULL;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2];
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    int drain_ms = 0;
    if (argc > 1) napi_get_value_int32(env, argv[1], &drain_ms);
    int rc = outbox_close(argc > 0 ? engine_arg(env, argv[0]) : NULL, drain_ms);
    if (rc != 0) return throw_outbox(env, rc);
    return NULL;
}

static napi_value js_free(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value argv[1];
    CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc > 0) outbox_free(engine_arg(env, argv[0]));
    return NULL;
}

/* ---- The analytics model (SPEC E5) ---- */

/* Up to 6 arguments of a call, with the engine first; NULL (a TypeError thrown) when fewer than `needed`. */
struct args { size_t argc; napi_value argv[6]; void *data; outbox_engine *engine; };

static int get_args(napi_env env, napi_callback_info info, size_t needed, const char *usage, struct args *a) {
    a->argc = 6;
    if (napi_get_cb_info(env, info, &a->argc, a->argv, NULL, &a->data) != napi_ok || a->argc < needed) {
        napi_throw_type_error(env, NULL, usage);
        return 0;
    }
    a->engine = engine_arg(env, a->argv[0]);
    return 1;
}

/* A string argument (or NULL for null/undefined when `optional`); 0 with a TypeError thrown otherwise. */
static int text_arg(napi_env env, struct args *a, size_t index, int optional, const char *usage, char **out) {
    int ok = 1;
    *out = index < a->argc ? string_arg(env, a->argv[index], &ok) : NULL;
    if (!ok || (!optional && !*out)) {
        free(*out);
        *out = NULL;
        napi_throw_type_error(env, NULL, usage);
        return 0;
    }
    return 1;
}

static int number_arg(napi_env env, struct args *a, size_t index, double fallback, const char *usage, double *out) {
    napi_valuetype type = napi_undefined;
    if (index < a->argc) napi_typeof(env, a->argv[index], &type);
    if (type == napi_undefined || type == napi_null) { *out = fallback; return 1; }
    if (type != napi_number || napi_get_value_double(env, a->argv[index], out) != napi_ok) {
        napi_throw_type_error(env, NULL, usage);
        return 0;
    }
    return 1;
}

static int flags_arg(napi_env env, struct args *a, size_t index) {
    bool critical = false;
    if (index < a->argc) napi_get_value_bool(env, a->argv[index], &critical);
    return critical ? OUTBOX_CRITICAL : 0;
}

static napi_value result_of(napi_env env, int rc) { return rc != 0 ? throw_outbox(env, rc) : NULL; }

/* startSession, endSession, enterBackground, enterForeground: the C function is the property's data. */
static napi_value js_engine_call(napi_env env, napi_callback_info info) {
    struct args a;
    if (!get_args(env, info, 1, "expected (engine)", &a)) return NULL;
    int (*function)(outbox_engine *) = (int (*)(outbox_engine *))a.data;
    return result_of(env, function(a.engine));
}

static napi_value js_track_screen(napi_env env, napi_callback_info info) {
    const char *usage = "trackScreen(engine, name, path|null, propertiesJSON|null): strings";
    struct args a;
    char *name = NULL, *where = NULL, *props = NULL;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 0, usage, &name)) return NULL;
    if (!text_arg(env, &a, 2, 1, usage, &where) || !text_arg(env, &a, 3, 1, usage, &props)) { free(name); free(where); return NULL; }
    int rc = outbox_track_screen(a.engine, name, where, props);
    free(name); free(where); free(props);
    return result_of(env, rc);
}

static napi_value js_track_category(napi_env env, napi_callback_info info) {
    const char *usage = "trackCategory(engine, name, value|null, durationMs|null, propertiesJSON|null, critical)";
    struct args a;
    char *name = NULL, *value = NULL, *props = NULL;
    double duration = -1;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 0, usage, &name)) return NULL;
    if (!text_arg(env, &a, 2, 1, usage, &value) || !number_arg(env, &a, 3, -1, usage, &duration)
        || !text_arg(env, &a, 4, 1, usage, &props)) { free(name); free(value); return NULL; }
    int rc = outbox_track_category(a.engine, name, value, duration, props, flags_arg(env, &a, 5));
    free(name); free(value); free(props);
    return result_of(env, rc);
}

static napi_value js_set_user_id(napi_env env, napi_callback_info info) {
    const char *usage = "setUserId(engine, id|null): a string or null";
    struct args a;
    char *id = NULL;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 1, usage, &id)) return NULL;
    int rc = outbox_set_user_id(a.engine, id);
    free(id);
    return result_of(env, rc);
}

static napi_value js_set_user_properties(napi_env env, napi_callback_info info) {
    const char *usage = "setUserProperties(engine, propertiesJSON): a string";
    struct args a;
    char *props = NULL;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 0, usage, &props)) return NULL;
    int rc = outbox_set_user_properties(a.engine, props);
    free(props);
    return result_of(env, rc);
}

static napi_value js_identify(napi_env env, napi_callback_info info) {
    const char *usage = "identify(engine, userId, traitsJSON|null): strings";
    struct args a;
    char *user = NULL, *traits = NULL;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 0, usage, &user)) return NULL;
    if (!text_arg(env, &a, 2, 1, usage, &traits)) { free(user); return NULL; }
    int rc = outbox_identify(a.engine, user, traits);
    free(user); free(traits);
    return result_of(env, rc);
}

static napi_value js_start_timer(napi_env env, napi_callback_info info) {
    const char *usage = "startTimer(engine, name): a string";
    struct args a;
    char *name = NULL;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 0, usage, &name)) return NULL;
    int64_t timer = outbox_start_timer(a.engine, name);
    free(name);
    if (timer < 0) return throw_outbox(env, (int)timer);
    napi_value result;
    CALL(env, napi_create_int64(env, timer, &result));
    return result;
}

/* pauseTimer and resumeTimer: the C function is the property's data. */
static napi_value js_timer_call(napi_env env, napi_callback_info info) {
    const char *usage = "expected (engine, timer): the number startTimer returned";
    struct args a;
    double timer = 0;
    if (!get_args(env, info, 2, usage, &a) || !number_arg(env, &a, 1, 0, usage, &timer)) return NULL;
    int (*function)(outbox_engine *, int64_t) = (int (*)(outbox_engine *, int64_t))a.data;
    return result_of(env, function(a.engine, (int64_t)timer));
}

static napi_value js_end_timer(napi_env env, napi_callback_info info) {
    const char *usage = "endTimer(engine, timer, propertiesJSON|null, critical): timer is startTimer's number";
    struct args a;
    double timer = 0;
    char *props = NULL;
    if (!get_args(env, info, 2, usage, &a) || !number_arg(env, &a, 1, 0, usage, &timer)
        || !text_arg(env, &a, 2, 1, usage, &props)) return NULL;
    int rc = outbox_end_timer(a.engine, (int64_t)timer, props, flags_arg(env, &a, 3));
    free(props);
    return result_of(env, rc);
}

static napi_value js_end_timer_named(napi_env env, napi_callback_info info) {
    const char *usage = "endTimerNamed(engine, name, propertiesJSON|null, critical): strings";
    struct args a;
    char *name = NULL, *props = NULL;
    if (!get_args(env, info, 2, usage, &a) || !text_arg(env, &a, 1, 0, usage, &name)) return NULL;
    if (!text_arg(env, &a, 2, 1, usage, &props)) { free(name); return NULL; }
    int rc = outbox_end_timer_named(a.engine, name, props, flags_arg(env, &a, 3));
    free(name); free(props);
    return result_of(env, rc);
}

static napi_value js_send_location(napi_env env, napi_callback_info info) {
    const char *usage = "sendLocation(engine, latitude, longitude, accuracy|null): numbers";
    struct args a;
    double latitude = 0, longitude = 0, accuracy = -1;
    if (!get_args(env, info, 3, usage, &a) || !number_arg(env, &a, 1, 0.0 / 0.0, usage, &latitude)
        || !number_arg(env, &a, 2, 0.0 / 0.0, usage, &longitude) || !number_arg(env, &a, 3, -1, usage, &accuracy))
        return NULL;
    return result_of(env, outbox_send_location(a.engine, latitude, longitude, accuracy));
}

static napi_value js_set_reachability(napi_env env, napi_callback_info info) {
    const char *usage = "setReachability(engine, 1|0|-1): online, offline, or the engine's own watcher";
    struct args a;
    double reachability = 0;
    if (!get_args(env, info, 2, usage, &a) || !number_arg(env, &a, 1, 0.5, usage, &reachability)) return NULL;
    if (reachability != (int)reachability) { napi_throw_type_error(env, NULL, usage); return NULL; }
    return result_of(env, outbox_set_reachability(a.engine, (int)reachability));
}

/* ---- SPEC H1: the before-store hook ---- */

/* The JavaScript hook of one engine and the host's memory for its replacements (outbox.h: the engine copies a
   replacement before the tracking call returns; the memory stays ours). Every call that tracks runs on Node's main
   thread, so the hook is called there, inside the addon function that tracks. */
struct hook {
    napi_env env;
    napi_ref function;
    char *replacement;
};

static int run_hook(const char *event_json, void *user, const char **replacement_json) {
    struct hook *hook = user;
    napi_env env = hook->env;
    napi_value function, undefined, argument, result;
    napi_valuetype type;
    if (napi_get_reference_value(env, hook->function, &function) != napi_ok || !function
        || napi_get_undefined(env, &undefined) != napi_ok
        || napi_create_string_utf8(env, event_json, NAPI_AUTO_LENGTH, &argument) != napi_ok)
        return -1;
    /* A hook that throws: the exception stays pending, the call fails and stores nothing, and JavaScript sees it. */
    if (napi_call_function(env, undefined, function, 1, &argument, &result) != napi_ok) return -1;
    if (napi_typeof(env, result, &type) != napi_ok) return -1;
    if (type == napi_undefined) return OUTBOX_HOOK_STORE; /* the event as it was */
    if (type == napi_null) return OUTBOX_HOOK_DROP;
    int ok;
    char *text = string_arg(env, result, &ok);
    if (!ok || !text) return -1;
    free(hook->replacement);
    hook->replacement = text;
    *replacement_json = text;
    return OUTBOX_HOOK_STORE;
}

static void free_hook(napi_env env, void *data, void *hint) {
    (void)hint;
    struct hook *hook = data;
    napi_delete_reference(env, hook->function);
    free(hook->replacement);
    free(hook);
}

/* Sets (a function) or removes (null) the engine's hook. The handle returned owns the hook's memory: outbox.js keeps it
   on the engine object for as long as the hook is set (the hook runs only inside calls made through that object). */
static napi_value js_set_before_store(napi_env env, napi_callback_info info) {
    const char *usage = "setBeforeStore(engine, hook|null): hook a function";
    struct args a;
    if (!get_args(env, info, 2, usage, &a)) return NULL;
    napi_valuetype type;
    CALL(env, napi_typeof(env, a.argv[1], &type));
    if (type == napi_null || type == napi_undefined) return result_of(env, outbox_set_before_store(a.engine, NULL, NULL));
    if (type != napi_function) { napi_throw_type_error(env, NULL, usage); return NULL; }
    struct hook *hook = calloc(1, sizeof *hook);
    if (!hook) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
    hook->env = env;
    napi_value handle;
    if (napi_create_reference(env, a.argv[1], 1, &hook->function) != napi_ok) { free(hook); return NULL; }
    if (napi_create_external(env, hook, free_hook, NULL, &handle) != napi_ok) {
        napi_delete_reference(env, hook->function);
        free(hook);
        return NULL;
    }
    int rc = outbox_set_before_store(a.engine, run_hook, hook);
    if (rc != 0) return throw_outbox(env, rc); /* the handle, unreferenced, frees the hook */
    return handle;
}

static napi_value init(napi_env env, napi_value exports) {
    napi_property_descriptor functions[] = {
        {"open", NULL, js_open, NULL, NULL, NULL, napi_default, NULL},
        {"track", NULL, js_track, NULL, NULL, NULL, napi_default, NULL},
        {"dispatch", NULL, js_dispatch, NULL, NULL, NULL, napi_default, NULL},
        {"status", NULL, js_status, NULL, NULL, NULL, napi_default, NULL},
        {"setEnabled", NULL, js_set_enabled, NULL, NULL, NULL, napi_default, NULL},
        {"update", NULL, js_update, NULL, NULL, NULL, napi_default, NULL},
        {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
        {"free", NULL, js_free, NULL, NULL, NULL, napi_default, NULL},
        {"startSession", NULL, js_engine_call, NULL, NULL, NULL, napi_default, (void *)outbox_start_session},
        {"endSession", NULL, js_engine_call, NULL, NULL, NULL, napi_default, (void *)outbox_end_session},
        {"enterBackground", NULL, js_engine_call, NULL, NULL, NULL, napi_default, (void *)outbox_enter_background},
        {"enterForeground", NULL, js_engine_call, NULL, NULL, NULL, napi_default, (void *)outbox_enter_foreground},
        {"trackScreen", NULL, js_track_screen, NULL, NULL, NULL, napi_default, NULL},
        {"trackCategory", NULL, js_track_category, NULL, NULL, NULL, napi_default, NULL},
        {"setUserId", NULL, js_set_user_id, NULL, NULL, NULL, napi_default, NULL},
        {"setUserProperties", NULL, js_set_user_properties, NULL, NULL, NULL, napi_default, NULL},
        {"identify", NULL, js_identify, NULL, NULL, NULL, napi_default, NULL},
        {"startTimer", NULL, js_start_timer, NULL, NULL, NULL, napi_default, NULL},
        {"pauseTimer", NULL, js_timer_call, NULL, NULL, NULL, napi_default, (void *)outbox_pause_timer},
        {"resumeTimer", NULL, js_timer_call, NULL, NULL, NULL, napi_default, (void *)outbox_resume_timer},
        {"endTimer", NULL, js_end_timer, NULL, NULL, NULL, napi_default, NULL},
        {"endTimerNamed", NULL, js_end_timer_named, NULL, NULL, NULL, napi_default, NULL},
        {"sendLocation", NULL, js_send_location, NULL, NULL, NULL, napi_default, NULL},
        {"setReachability", NULL, js_set_reachability, NULL, NULL, NULL, napi_default, NULL},
        {"setBeforeStore", NULL, js_set_before_store, NULL, NULL, NULL, napi_default, NULL},
    };
    CALL(env, napi_define_properties(env, exports, sizeof functions / sizeof functions[0], functions));
    napi_value version;
    CALL(env, napi_create_string_utf8(env, outbox_version(), NAPI_AUTO_LENGTH, &version));
    CALL(env, napi_set_named_property(env, exports, "version", version));
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
