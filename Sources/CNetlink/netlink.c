#define _GNU_SOURCE
#include "CNetlink.h"
#include <pthread.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

int outbox_netlink_open(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    struct sockaddr_nl address;
    memset(&address, 0, sizeof(address));
    address.nl_family = AF_NETLINK;
    address.nl_pid = 0;  // the kernel assigns our port id
    address.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE;
    if (bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int outbox_netlink_drain(int fd) {
    char buffer[16384];
    int messages = 0;
    for (;;) {
        ssize_t got = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return messages;
            if (errno == EINTR) continue;
            return -errno;
        }
        if (got == 0) return messages;
        messages++;
    }
}

void outbox_set_thread_name(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof(truncated) - 1);
    truncated[sizeof(truncated) - 1] = 0;
    pthread_setname_np(pthread_self(), truncated);
}
