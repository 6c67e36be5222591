#ifndef OUTBOX_CNETLINK_H
#define OUTBOX_CNETLINK_H
// rtnetlink for the reachability watcher (SPEC N1): a socket subscribed to link, address and route changes.
// Written in C because the kernel's netlink headers are macros and packed structs Swift imports poorly.

// Opens a non-blocking NETLINK_ROUTE socket bound to the link, IPv4/IPv6 address and route groups.
// Returns the fd, or -errno.
int outbox_netlink_open(void);

// Reads and discards every queued message without blocking. Returns the number of messages read, or -errno
// for an error other than EAGAIN (ENOBUFS: the kernel dropped events; the caller re-evaluates anyway).
int outbox_netlink_drain(int fd);

// Names the calling thread for the kernel (top -H, perf, /proc/PID/task/TID/comm); at most 15 bytes are kept.
// Here because Swift cannot reach pthread_setname_np (a _GNU_SOURCE declaration) through Glibc.
void outbox_set_thread_name(const char *name);
#endif
