#include "COutboxSupport.h"
#include "../../include/outbox.h"

#include <string.h>

#define OUTBOX_STRINGIFY2(x) #x
#define OUTBOX_STRINGIFY(x) OUTBOX_STRINGIFY2(x)

/* Initial-exec TLS would fail to dlopen once the static TLS reserve is used up (Node loads addons late);
   global-dynamic costs one __tls_get_addr per failure, which only error paths pay. */
static __thread char last_error[1024] __attribute__((tls_model("global-dynamic")));
static __thread int last_code __attribute__((tls_model("global-dynamic")));
static __thread int in_log_handler __attribute__((tls_model("global-dynamic")));

int outboxc_fail(int code, const char *message, size_t length) {
    if (length >= sizeof last_error) {
        length = sizeof last_error - 1;
        /* Never cut a UTF-8 sequence in two: back up over continuation bytes. */
        while (length > 0 && ((unsigned char)message[length] & 0xC0) == 0x80) length--;
    }
    memcpy(last_error, message, length);
    last_error[length] = '\0';
    last_code = code;
    return code;
}

void outboxc_log_handler_entered(int entered) {
    in_log_handler += entered ? 1 : -1;
}

int outboxc_in_log_handler(void) {
    return in_log_handler > 0;
}

const char *outbox_last_error(void) {
    return last_error;
}

int outbox_last_error_code(void) {
    return last_code;
}

const char *outbox_version(void) {
    return OUTBOX_STRINGIFY(OUTBOX_VERSION_MAJOR) "." OUTBOX_STRINGIFY(OUTBOX_VERSION_MINOR) "."
        OUTBOX_STRINGIFY(OUTBOX_VERSION_PATCH);
}
