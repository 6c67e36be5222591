#ifndef OUTBOX_CFILESYNC_H
#define OUTBOX_CFILESYNC_H

/// Starts writing `fd`'s dirty pages to its device and returns without waiting for them (Linux
/// `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which the Swift Glibc module does not export). A later
/// `fdatasync` then has little left to write. Returns 0, or -errno.
int outbox_start_write_back(int fd);

#endif
