#include <sqlite3.h>
// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type outbox_sqlite_transient(void) { return SQLITE_TRANSIENT; }
static inline sqlite3_destructor_type outbox_sqlite_static(void) { return SQLITE_STATIC; }
