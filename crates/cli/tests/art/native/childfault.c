/* libchildfault.so: makes oomguard's ART dump child misbehave, for tests/art_faults.rs. Loaded
 * into the ART process with LD_PRELOAD, it interposes write, writev, pwrite and pwrite64: every
 * library's calls (libart's, which the tee's GOT hooks pass on to the function they found, and
 * liboomguard's stripper writing the mini file) reach it before libc. In every process but a
 * dump child (comm "oomguard-dump") it only calls libc's function. In a dump child, with
 *   OOMGUARD_TEST_CHILD_FAULT=hang|exit   what to do,
 *   OOMGUARD_TEST_CHILD_FAULT_AFTER=N     after N writes went through (default 2),
 *   OOMGUARD_TEST_CHILD_FAULT_MARK=PATH   a file created when the fault starts,
 * the (N+1)th write never returns (hang: the child waits in pause() for its deadline, or for
 * a kill -9 from outside) or ends the child with _exit(3) (exit). Test code only; liboomguard
 * knows nothing of it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static write_fn real_write;
static writev_fn real_writev;
static pwrite_fn real_pwrite;
static pwrite_fn real_pwrite64;
/* Writes seen in this dump child (the parent's count stays 0: it never counts). */
static long writes;

__attribute__((constructor)) static void resolve(void) {
  real_write = (write_fn)dlsym(RTLD_NEXT, "write");
  real_writev = (writev_fn)dlsym(RTLD_NEXT, "writev");
  real_pwrite = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
  real_pwrite64 = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite64");
}

/* Raw system calls from here on: nothing that could take a lock the fork copied. */
static void say(const char *s) { syscall(SYS_write, 2, s, strlen(s)); }

static void fault_point(void) {
  const char *mode = getenv("OOMGUARD_TEST_CHILD_FAULT");
  if (mode == NULL || *mode == 0) return;
  char comm[17] = {0};
  if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0 || strcmp(comm, "oomguard-dump") != 0) return;
  const char *after = getenv("OOMGUARD_TEST_CHILD_FAULT_AFTER");
  long n = after ? strtol(after, NULL, 10) : 2;
  if (writes++ < n) return;
  const char *mark = getenv("OOMGUARD_TEST_CHILD_FAULT_MARK");
  if (mark != NULL) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      syscall(SYS_write, fd, mode, strlen(mode));
      syscall(SYS_close, fd);
    }
  }
  if (strcmp(mode, "exit") == 0) {
    say("childfault: dump child exits with code 3 in the middle of its dump\n");
    syscall(SYS_exit_group, 3);
  }
  say("childfault: dump child hangs in the middle of its dump\n");
  for (;;) syscall(SYS_pause);
}

ssize_t write(int fd, const void *buf, size_t n) {
  fault_point();
  return real_write(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
  fault_point();
  return real_writev(fd, iov, cnt);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  fault_point();
  return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
  fault_point();
  return real_pwrite64(fd, buf, n, off);
}
