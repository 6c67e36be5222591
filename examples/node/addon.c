/*
 * SPEC E4: a minimal N-API addon that runs an Outbox engine on Node's own libuv loop (napi_get_uv_event_loop):
 * the engine starts no thread of its own; its timers, sockets and async wake-ups are handles on Node's loop,
 * unref'd, so they never keep Node alive. Built by `make node-example` with the C compiler and Node's headers
 * (no node-gyp). Every function runs on Node's main thread, the loop's thread, as outbox.h asks of
 * outbox_open and outbox_close in host mode.
 *
 * JavaScript API (see demo.js):
 *   open(configJSON) -> engine          track(engine, name, propertiesJSON|null, critical) -> undefined
 *   dispatch(engine, callback(result))  status(engine) -> JSON string
 *   setEnabled(engine, enabled)         update(engine, configJSON)
 *   close(engine, drainMs)              free(engine)
 * Failures throw an Error whose message is outbox_last_error() and whose `code` is the OUTBOX_E… value.
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
   async hooks). The function also holds a reference on the loop while a dispatch is outstanding: the engine's own
   handles are unref'd and would let Node exit before the answer. */
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
    };
    CALL(env, napi_define_properties(env, exports, sizeof functions / sizeof functions[0], functions));
    napi_value version;
    CALL(env, napi_create_string_utf8(env, outbox_version(), NAPI_AUTO_LENGTH, &version));
    CALL(env, napi_set_named_property(env, exports, "version", version));
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
