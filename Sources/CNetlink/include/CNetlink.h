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
#endif
