#define _GNU_SOURCE
#include "CFileSync.h"
#include <errno.h>
#include <fcntl.h>

int outbox_start_write_back(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0 ? 0 : -errno;
}
