// A stand-in for Android's libart.so, for tests on Linux (tests/art_standin.rs).
//
// It exports the ART symbols oomguard's ART fork dumper resolves, under their real
// Itanium-mangled names, with the behaviour the dumper relies on:
// - art::Mutex and art::ReaderWriterMutex are real pthread locks; art::Locks::thread_list_lock_,
//   art::Locks::thread_suspend_count_lock_ and art::Locks::mutator_lock_ point to instances of
//   them.
// - art::gc::ScopedGCCriticalSection holds a "GC" lock from construction to destruction (in
//   ART no GC may start meanwhile; a thread waiting to start one starts it as soon as the
//   section ends); art::ScopedSuspendAll takes thread_list_lock_ and then
//   thread_suspend_count_lock_ for a moment and the mutator lock exclusively until it is
//   destroyed, as ART's ThreadList::SuspendAll does.
// - art::hprof::DumpHeap does what ART's does around the dump (a GC critical section and a
//   suspend-all of its own), then writes the bytes of a real HPROF file (set by the test)
//   through open64/write/close imported from the C library, so the tee's GOT hooks see them.
// Every call is recorded in order (standin_events); the dump child writes its own record to
// a file beside the dump. Test controls: standin_* functions.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

namespace art {
class Thread {
 public:
  EXPORT static Thread* CurrentFromGdb();
  int tid;
};

class Mutex {
 public:
  EXPORT void ExclusiveLock(Thread* self);
  EXPORT void ExclusiveUnlock(Thread* self);
  pthread_mutex_t m;
  const char* name;
};

class ReaderWriterMutex {
 public:
  EXPORT void ExclusiveLock(Thread* self);
  EXPORT void ExclusiveUnlock(Thread* self);
  pthread_rwlock_t l;
};

struct Locks {
  EXPORT static ReaderWriterMutex* mutator_lock_;
  EXPORT static Mutex* thread_list_lock_;
  EXPORT static Mutex* thread_suspend_count_lock_;
};

class Dbg {
 public:
  EXPORT static void SuspendVM();
  EXPORT static void ResumeVM();
};

class ScopedSuspendAll {
 public:
  EXPORT ScopedSuspendAll(const char* cause, bool long_suspend);
  EXPORT ~ScopedSuspendAll();
};

namespace gc {
enum GcCause { kGcCauseNone };
enum CollectorType { kCollectorTypeNone };
class ScopedGCCriticalSection {
 public:
  EXPORT ScopedGCCriticalSection(Thread* self, GcCause cause, CollectorType collector_type);
  EXPORT ~ScopedGCCriticalSection();
  Thread* self_;
};
#ifdef STANDIN_CMC
namespace collector {
class MarkCompact {
 public:
  EXPORT void RunPhases();
};
void MarkCompact::RunPhases() {}
}  // namespace collector
#endif
}  // namespace gc

namespace hprof {
EXPORT void DumpHeap(const char* filename, int fd, bool direct_to_ddms);
}
}  // namespace art

// What ART's generated operator<<(std::ostream&, CollectorType) holds: the enum's names, from
// which oomguard tells the enum's layout. Which ones depends on the ART version built.
extern "C" EXPORT const char* const standin_collector_names[] = {
    "CollectorTypeNone",
#ifdef STANDIN_CMC
    "CollectorTypeCMC",
#endif
#ifdef STANDIN_CMC_BACKGROUND
    "CollectorTypeCMCBackground",
#endif
    "CollectorTypeHprof",
};

static art::Thread the_thread = {1};
static art::Mutex thread_list_mutex = {PTHREAD_MUTEX_INITIALIZER, "thread_list"};
static art::Mutex suspend_count_mutex = {PTHREAD_MUTEX_INITIALIZER, "thread_suspend_count"};
static art::ReaderWriterMutex mutator_mutex = {PTHREAD_RWLOCK_INITIALIZER};
static pthread_mutex_t gc_lock = PTHREAD_MUTEX_INITIALIZER;
art::ReaderWriterMutex* art::Locks::mutator_lock_ = &mutator_mutex;
art::Mutex* art::Locks::thread_list_lock_ = &thread_list_mutex;
art::Mutex* art::Locks::thread_suspend_count_lock_ = &suspend_count_mutex;

// The record of calls: fixed storage, no allocation (the dump child appends to its copy).
static char events[8192];
static size_t events_len;
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;

static void note(const char* what) {
  pthread_mutex_lock(&events_lock);
  size_t n = strlen(what);
  if (events_len + n + 2 < sizeof(events)) {
    if (events_len) events[events_len++] = ',';
    memcpy(events + events_len, what, n);
    events_len += n;
    events[events_len] = 0;
  }
  pthread_mutex_unlock(&events_lock);
}

// Test controls.
static char source_path[4096];
// 0 dump, 1 abort, 2 exit 3, 3 hang, 4 write nothing, 5 dump through raw system calls (as
// a library the tee does not hook would: its GOT hooks see nothing)
static int mode;
static int hold_thread_list_ms;
static int hold_suspend_count_ms;
static int gc_waiting_ms;
static pid_t loaded_in;

__attribute__((constructor)) static void standin_init() { loaded_in = getpid(); }

extern "C" EXPORT void standin_set_source(const char* path) {
  snprintf(source_path, sizeof(source_path), "%s", path);
}
extern "C" EXPORT void standin_set_mode(int m) { mode = m; }
// After the next suspend-all, another thread takes thread_list_lock_ and keeps it this long
// (a native thread attaching to the runtime, which the suspension does not stop).
extern "C" EXPORT void standin_hold_thread_list_after_suspend(int ms) { hold_thread_list_ms = ms; }
// After the next suspend-all, another thread takes thread_suspend_count_lock_ and keeps it this
// long (in ART, a thread leaving a wait of a suspended state checks its suspend count under it).
extern "C" EXPORT void standin_hold_suspend_count_after_suspend(int ms) {
  hold_suspend_count_ms = ms;
}
// At the next suspend-all, another thread waits to start a GC (an allocation that found the
// heap full), blocked by the GC critical section; it starts its GC as soon as the section ends
// and runs it this long.
extern "C" EXPORT void standin_gc_waiting_at_suspend(int ms) { gc_waiting_ms = ms; }
extern "C" EXPORT const char* standin_events() { return events; }
extern "C" EXPORT void standin_clear_events() {
  pthread_mutex_lock(&events_lock);
  events_len = 0;
  events[0] = 0;
  pthread_mutex_unlock(&events_lock);
}


// A native thread inside the tee's hook at the fork (for the test of the tee's spin flag):
// a thread that keeps opening /dev/null through this library's imports (the tee's hooks),
// and a signal that stops it while it holds the tee's spin flag, whose address the test gives.
static volatile const unsigned char* tee_lock;
static pid_t churn_tid;
static volatile int churn_stop;
static int reply_pipe[2], release_pipe[2];
static int stop_churn_at_suspend;

static void on_usr2(int) {
  char c = (tee_lock && *tee_lock) ? 'H' : 'N';
  write(reply_pipe[1], &c, 1);
  if (c == 'H') read(release_pipe[0], &c, 1);
}

static void* churn(void*) {
  churn_tid = (pid_t)syscall(SYS_gettid);
  while (!churn_stop) {
    int fd = open64("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
  }
  return nullptr;
}

extern "C" EXPORT void standin_hold_tee_lock_at_suspend(const unsigned char* lock) {
  tee_lock = lock;
  pipe(reply_pipe);
  pipe(release_pipe);
  struct sigaction sa = {};
  sa.sa_handler = on_usr2;
  sigaction(SIGUSR2, &sa, nullptr);
  pthread_t t;
  pthread_create(&t, nullptr, churn, nullptr);
  pthread_detach(t);
  while (!churn_tid) usleep(1000);
  stop_churn_at_suspend = 1;
}

// In the parent's suspend-all: stop the churning thread inside the tee's lock.
static void hold_tee_lock() {
  for (;;) {
    syscall(SYS_tgkill, getpid(), churn_tid, SIGUSR2);
    char c = 0;
    read(reply_pipe[0], &c, 1);
    if (c == 'H') break;
  }
  note("tee_lock_held_by_native_thread");
}

static void release_tee_lock() {
  churn_stop = 1;
  char c = 'r';
  write(release_pipe[1], &c, 1);
}

art::Thread* art::Thread::CurrentFromGdb() { return &the_thread; }

void art::Mutex::ExclusiveLock(Thread*) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%s%s_lock", getpid() == loaded_in ? "" : "child:", name);
  note(buf);
  pthread_mutex_lock(&m);
}
void art::Mutex::ExclusiveUnlock(Thread*) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%s%s_unlock", getpid() == loaded_in ? "" : "child:", name);
  note(buf);
  pthread_mutex_unlock(&m);
}
void art::ReaderWriterMutex::ExclusiveLock(Thread*) {
  note("mutator_lock");
  pthread_rwlock_wrlock(&l);
}
void art::ReaderWriterMutex::ExclusiveUnlock(Thread*) {
  note("mutator_unlock");
  pthread_rwlock_unlock(&l);
}

void art::Dbg::SuspendVM() { note("suspend_vm"); }
void art::Dbg::ResumeVM() { note("resume_vm"); }

// Another thread that takes a lock and keeps it `ms`: `taken` says when it has it.
struct Holder {
  pthread_mutex_t m;
  pthread_cond_t c;
  int taken;
  int ms;
  pthread_mutex_t* lock;
};
static Holder holder = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, nullptr};

static void* hold_lock(void*) {
  pthread_mutex_lock(holder.lock);
  pthread_mutex_lock(&holder.m);
  holder.taken = 1;
  pthread_cond_broadcast(&holder.c);
  pthread_mutex_unlock(&holder.m);
  usleep(holder.ms * 1000);
  pthread_mutex_unlock(holder.lock);
  return nullptr;
}

// Starts a thread that takes LOCK and keeps it MS; returns once it has it.
static void hold_from_another_thread(pthread_mutex_t* lock, int ms) {
  holder.ms = ms;
  holder.lock = lock;
  holder.taken = 0;
  pthread_t t;
  pthread_create(&t, nullptr, hold_lock, nullptr);
  pthread_detach(t);
  pthread_mutex_lock(&holder.m);
  while (!holder.taken) pthread_cond_wait(&holder.c, &holder.m);
  pthread_mutex_unlock(&holder.m);
}

// A GC running when the next dump asks for the critical section: another thread holds the GC
// lock this long (this returns once it has it), and the section's constructor waits for it.
extern "C" EXPORT void standin_gc_running(int ms) { hold_from_another_thread(&gc_lock, ms); }

// A thread waiting to start a GC: blocked on the GC lock until the critical section ends, then
// it runs its GC (holds the lock) for `gc_waiting_ms`. `gc_waiter` is 1 while it waits, 2 once
// it has started its GC.
static pthread_mutex_t gc_waiter_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gc_waiter_c = PTHREAD_COND_INITIALIZER;
static int gc_waiter;
static void* wait_to_start_gc(void* arg) {
  int ms = (int)(long)arg;
  pthread_mutex_lock(&gc_waiter_m);
  gc_waiter = 1;
  pthread_cond_broadcast(&gc_waiter_c);
  pthread_mutex_unlock(&gc_waiter_m);
  pthread_mutex_lock(&gc_lock);
  pthread_mutex_lock(&gc_waiter_m);
  gc_waiter = 2;
  pthread_cond_broadcast(&gc_waiter_c);
  pthread_mutex_unlock(&gc_waiter_m);
  usleep(ms * 1000);
  pthread_mutex_unlock(&gc_lock);
  return nullptr;
}

// The suspend-all ART does: the thread list walked under its lock and the suspend counts
// raised under theirs, then the mutator lock taken exclusively.
static void suspend_all() {
  pthread_mutex_lock(&thread_list_mutex.m);
  pthread_mutex_lock(&suspend_count_mutex.m);
  pthread_mutex_unlock(&suspend_count_mutex.m);
  pthread_mutex_unlock(&thread_list_mutex.m);
  pthread_rwlock_wrlock(&mutator_mutex.l);
}

art::ScopedSuspendAll::ScopedSuspendAll(const char*, bool) {
  note("ssa_ctor");
  suspend_all();
  if (stop_churn_at_suspend && getpid() == loaded_in) hold_tee_lock();
  if (hold_thread_list_ms > 0 && getpid() == loaded_in) {
    hold_from_another_thread(&thread_list_mutex.m, hold_thread_list_ms);
    hold_thread_list_ms = 0;
  }
  if (hold_suspend_count_ms > 0 && getpid() == loaded_in) {
    hold_from_another_thread(&suspend_count_mutex.m, hold_suspend_count_ms);
    hold_suspend_count_ms = 0;
  }
  if (gc_waiting_ms > 0 && getpid() == loaded_in) {
    pthread_t t;
    pthread_create(&t, nullptr, wait_to_start_gc, (void*)(long)gc_waiting_ms);
    pthread_detach(t);
    gc_waiting_ms = 0;
    pthread_mutex_lock(&gc_waiter_m);
    while (gc_waiter != 1) pthread_cond_wait(&gc_waiter_c, &gc_waiter_m);
    pthread_mutex_unlock(&gc_waiter_m);
    // Let it reach the GC lock.
    usleep(20000);
  }
}

art::ScopedSuspendAll::~ScopedSuspendAll() {
  note("ssa_dtor");
  if (stop_churn_at_suspend && getpid() == loaded_in) {
    stop_churn_at_suspend = 0;
    release_tee_lock();
  }
  pthread_rwlock_unlock(&mutator_mutex.l);
}

art::gc::ScopedGCCriticalSection::ScopedGCCriticalSection(Thread* self, GcCause cause,
                                                          CollectorType collector_type) {
  char buf[64];
  snprintf(buf, sizeof(buf), "sgc_ctor(%d;%d)", (int)cause, (int)collector_type);
  note(buf);
  self_ = self;
  pthread_mutex_lock(&gc_lock);
}

art::gc::ScopedGCCriticalSection::~ScopedGCCriticalSection() {
  note(getpid() == loaded_in ? "sgc_dtor" : "child:sgc_dtor");
  pthread_mutex_unlock(&gc_lock);
  // A thread that waited to start a GC starts it now, before anything else of ours runs (in
  // ART: FinishGC's broadcast wakes it, and it marks its GC as running).
  if (getpid() == loaded_in) {
    pthread_mutex_lock(&gc_waiter_m);
    // 1: still waiting for the lock; 2: it took the lock before this took `gc_waiter_m`.
    if (gc_waiter != 0) {
      while (gc_waiter != 2) pthread_cond_wait(&gc_waiter_c, &gc_waiter_m);
      note("gc_started_by_another_thread");
    }
    gc_waiter = 0;
    pthread_mutex_unlock(&gc_waiter_m);
  }
}

static void write_events_beside(const char* filename) {
  char path[4200];
  snprintf(path, sizeof(path), "%s.events", filename);
  int fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write(fd, events, events_len);
  close(fd);
}

// Raw system calls, past the GOT entries the tee hooks.
static int raw_open(const char* path) {
  return (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}
static ssize_t raw_write(int fd, const void* p, size_t n) {
  return (ssize_t)syscall(SYS_write, fd, p, n);
}

// As ART's: the dump goes to `fd` when it is one (>= 0), else to a file opened by name.
void art::hprof::DumpHeap(const char* filename, int fd, bool) {
  note("dump_heap");
  // What ART's DumpHeap does first: no GC may run, every thread suspended.
  pthread_mutex_lock(&gc_lock);
  suspend_all();
  note("dump_heap_suspended");
  if (mode == 1) abort();
  if (mode == 2) _exit(3);
  if (mode == 3)
    for (;;) pause();
  if (mode != 4) {
    int out = fd >= 0 ? dup(fd)
              : mode == 5 ? raw_open(filename)
                          : open64(filename, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int in = open64(source_path, O_RDONLY | O_CLOEXEC);
    if (out >= 0 && in >= 0) {
      // ART buffers its output and writes it in pieces; vary the sizes.
      static char buf[1 << 16];
      size_t want = 4093;
      for (;;) {
        ssize_t n = read(in, buf, want);
        if (n <= 0) break;
        const char* p = buf;
        while (n > 0) {
          ssize_t w = mode == 5 ? raw_write(out, p, n) : write(out, p, n);
          if (w <= 0) break;
          p += w;
          n -= w;
        }
        want = want * 7 % sizeof(buf) + 1;
      }
    }
    if (in >= 0) close(in);
    if (out >= 0) close(out);
  }
  pthread_rwlock_unlock(&mutator_mutex.l);
  pthread_mutex_unlock(&gc_lock);
  note("dump_heap_done");
  write_events_beside(filename);
}
