#ifndef COUTBOX_SUPPORT_H
#define COUTBOX_SUPPORT_H

#include <stddef.h>

/* The parts of the C interface that C does best: the thread-local error message (E3) and the version string. The
   exported functions themselves (outbox_last_error, outbox_version) are defined in support.c. */

/* Sets the calling thread's message (copied, cut at a character boundary to fit) and returns `code`. */
int outboxc_fail(int code, const char *message, size_t length);

/* Whether the host's log function is running on the calling thread (set around each call of it): outbox_close,
   which may commit and close the store, refuses to run from inside a log line. */
void outboxc_log_handler_entered(int entered);
int outboxc_in_log_handler(void);

#endif
