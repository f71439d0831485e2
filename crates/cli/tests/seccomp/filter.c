// An LD_PRELOAD object that puts the process under Android 8.0's (API 26) app seccomp
// allowlist for x86_64, as zygote does for every app, before main() runs. The list and where its
// facts come from: android26_x86_64.txt beside this file, turned into allowlist.h by
// scripts/lib/setup.sh (build_seccomp_filter).
//
// A call outside the list raises SIGSYS; the handler writes the call's number, name and the
// caller's address (library + offset) to stderr and aborts, so the test fails saying which call.
// Active only when OOMGUARD_SECCOMP=android26 is set, so a wrapper can decide per process.
// OOMGUARD_SECCOMP=android26-survey prints the same line but answers the call with ENOSYS and
// goes on, to list every call a run makes outside the allowlist in one go (never in CI); the
// lines also go to the file OOMGUARD_SECCOMP_LOG names, since tests capture a JVM's stderr.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

struct entry { int nr; const char *name; };
#include "allowlist.h"  // allowed[], enosys[], all_names[]

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int out_fd = 2;

static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(out_fd, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void put_num(unsigned long v, int base) {
    char b[32];
    int i = sizeof b;
    b[--i] = 0;
    do {
        b[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && i > 0);
    put(b + i);
}

static int survey;
static const char *survey_log;

static void report(siginfo_t *si);

static void on_sigsys(int sig, siginfo_t *si, void *uc_) {
    (void)sig;
    ucontext_t *uc = uc_;
    report(si);
    if (survey) {
        if (survey_log) {
            int fd = openat(AT_FDCWD, survey_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0) {
                out_fd = fd;
                report(si);
                out_fd = 2;
                close(fd);
            }
        }
        uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
        return;
    }
    // Default action, unblocked, then abort: the process dies of SIGABRT with the message above.
    signal(SIGABRT, SIG_DFL);
    abort();
}

static void report(siginfo_t *si) {
    int nr = si->si_syscall;
    const char *name = "?";
    for (size_t i = 0; i < COUNT(all_names); i++)
        if (all_names[i].nr == nr) name = all_names[i].name;
    put("oomguard seccomp: system call ");
    put_num((unsigned long)nr, 10);
    put(" (");
    put(name);
    put(") is outside Android 8.0's app allowlist (tests/seccomp/android26_x86_64.txt); called from ");
    uintptr_t pc = (uintptr_t)si->si_call_addr;
    Dl_info di;
    if (dladdr((void *)pc, &di) && di.dli_fname) {
        put(di.dli_fname);
        put("+0x");
        put_num(pc - (uintptr_t)di.dli_fbase, 16);
        if (di.dli_sname) {
            put(" (");
            put(di.dli_sname);
            put(")");
        }
    } else {
        put("0x");
        put_num(pc, 16);
    }
    put("; pid ");
    put_num((unsigned long)getpid(), 10);
    put("\n");
}

__attribute__((constructor)) static void install(void) {
    const char *on = getenv("OOMGUARD_SECCOMP");
    if (!on) return;
    if (strcmp(on, "android26-survey") == 0) {
        survey = 1;
        survey_log = getenv("OOMGUARD_SECCOMP_LOG");
    }
    else if (strcmp(on, "android26") != 0) return;
    static struct sock_filter prog[4 + 2 * (COUNT(allowed) + COUNT(enosys)) + 1];
    size_t n = 0;
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    // x32 calls (bit 30 set) match no entry below and trap.
    for (size_t i = 0; i < COUNT(allowed); i++) {
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)allowed[i].nr, 0, 1);
        prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    for (size_t i = 0; i < COUNT(enosys); i++) {
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)enosys[i].nr, 0, 1);
        prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    }
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    struct sock_fprog fp = { .len = (unsigned short)n, .filter = prog };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) {
        put("oomguard seccomp: installing the filter failed\n");
        _exit(70);
    }
}
