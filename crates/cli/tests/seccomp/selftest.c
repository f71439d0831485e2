// Proves the filter works: an allowed call succeeds, a glibc-only call gets ENOSYS, and a call
// outside Android 8.0's allowlist (pidfd_open, allowed from Android 11) kills the process with
// the handler's message. scripts/test.sh checks the exit status and the message.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    if (syscall(SYS_getpid) != getpid()) return 1;
    errno = 0;
    if (syscall(SYS_statx, -1, "", 0, 0, NULL) != -1 || errno != ENOSYS) return 2;
    fprintf(stderr, "selftest: allowed and ENOSYS calls behave; now pidfd_open\n");
    syscall(SYS_pidfd_open, getpid(), 0);
    fprintf(stderr, "selftest: pidfd_open was not caught\n");
    return 3;
}
