// outbox-peak-rss COMMAND [ARG...]: runs COMMAND and, once it has exited, prints `peak_rss_kib=N` (its wait4
// ru_maxrss) on standard output after the command's own output; exits with the command's status.
//
// Why a helper: a child's ru_maxrss includes the peak of the memory it was started from. Spawned directly by
// outbox-bench (posix_spawn is a vfork), `outbox emit` would report at least outbox-bench's own peak (its
// in-process mock server, ~30–38 MB). Started from this small C process, it reports its own.
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: outbox-peak-rss COMMAND [ARG...]\n");
        return 64;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { perror("outbox-peak-rss: fork"); return 71; }
    if (pid == 0) {
        execv(argv[1], argv + 1);
        perror("outbox-peak-rss: exec");
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) { perror("outbox-peak-rss: wait4"); return 71; }
    }
    printf("peak_rss_kib=%ld\n", usage.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
