/* libartprobe.so: what the ART test programs (tests/art/app/ArtProbe.smali) need to see from
 * inside the app's process and cannot with the test core library (no java.io): the agent's
 * status.json, the process's children in /proc, a directory's entries, a number in a string.
 * Test code only; liboomguard knows nothing of it. */
#include <dirent.h>
#include <jni.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The "verdicts" figure of DIR/status.json, or -1 if the file or the field is missing. */
static int read_verdicts(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/status.json", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strstr(buf, "\"verdicts\":");
  if (p == NULL) return -1;
  return (int)strtol(p + strlen("\"verdicts\":"), NULL, 10);
}

/* ArtProbe.awaitVerdicts(dataDir, n, timeoutMs): waits until the agent's status.json (rewritten
 * when a verdict's action is done) counts at least N verdicts; returns the count then, or -1
 * at the timeout. */
static jint awaitVerdicts(JNIEnv *env, jclass cls, jstring dir, jint n, jint timeout_ms) {
  (void)cls;
  const char *d = (*env)->GetStringUTFChars(env, dir, NULL);
  if (d == NULL) return -1;
  long long end = now_ms() + timeout_ms;
  int got = -1;
  for (;;) {
    got = read_verdicts(d);
    if (got >= n) break;
    if (now_ms() > end) {
      got = -1;
      break;
    }
    nap_ms(10);
  }
  (*env)->ReleaseStringUTFChars(env, dir, d);
  return got;
}

/* Children of this process (any of its threads') named COMM (NULL: any) in STATE (0: any). */
static int children(const char *comm, char state) {
  pid_t me = getpid();
  DIR *proc = opendir("/proc");
  if (proc == NULL) return -1;
  int count = 0;
  struct dirent *e;
  while ((e = readdir(proc)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    /* pid (comm) state ppid ... ; comm may hold spaces and parentheses: the last ')' ends it. */
    char *open = strchr(line, '(');
    char *close = strrchr(line, ')');
    if (open == NULL || close == NULL || close[1] == 0) continue;
    char st = 0;
    int ppid = 0;
    if (sscanf(close + 2, "%c %d", &st, &ppid) != 2 || ppid != me) continue;
    *close = 0;
    if (comm != NULL && strcmp(open + 1, comm) != 0) continue;
    if (state != 0 && st != state) continue;
    count++;
  }
  closedir(proc);
  return count;
}

/* ArtProbe.dumpChildren(): this process's children named oomguard-dump, alive or not reaped. */
static jint dumpChildren(JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  return children("oomguard-dump", 0);
}

/* ArtProbe.zombies(): this process's children that ended and were not reaped (state Z). */
static jint zombies(JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  return children(NULL, 'Z');
}

/* Entries of DIR other than . and .., or -1 if it cannot be read. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  }
  closedir(d);
  return n;
}

/* ArtProbe.awaitEmpty(dir, timeoutMs): waits until DIR exists and holds nothing; false at the
 * timeout. */
static jboolean awaitEmpty(JNIEnv *env, jclass cls, jstring dir, jint timeout_ms) {
  (void)cls;
  const char *d = (*env)->GetStringUTFChars(env, dir, NULL);
  if (d == NULL) return JNI_FALSE;
  long long end = now_ms() + timeout_ms;
  jboolean ok = JNI_FALSE;
  for (;;) {
    if (entries(d) == 0) {
      ok = JNI_TRUE;
      break;
    }
    if (now_ms() > end) break;
    nap_ms(20);
  }
  (*env)->ReleaseStringUTFChars(env, dir, d);
  return ok;
}

/* ArtProbe.toInt(s): the decimal number S starts with (0 for null). */
static jint toInt(JNIEnv *env, jclass cls, jstring s) {
  (void)cls;
  if (s == NULL) return 0;
  const char *c = (*env)->GetStringUTFChars(env, s, NULL);
  if (c == NULL) return 0;
  jint v = (jint)strtol(c, NULL, 10);
  (*env)->ReleaseStringUTFChars(env, s, c);
  return v;
}

JNIEXPORT jint JNI_OnLoad(JavaVM *vm, void *reserved) {
  (void)reserved;
  JNIEnv *env;
  if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  JNINativeMethod m[] = {
      {"awaitVerdicts", "(Ljava/lang/String;II)I", (void *)awaitVerdicts},
      {"dumpChildren", "()I", (void *)dumpChildren},
      {"zombies", "()I", (void *)zombies},
      {"awaitEmpty", "(Ljava/lang/String;I)Z", (void *)awaitEmpty},
      {"toInt", "(Ljava/lang/String;)I", (void *)toInt},
  };
  jclass c = (*env)->FindClass(env, "ArtProbe");
  if (c == NULL) return JNI_ERR;
  int rc = (*env)->RegisterNatives(env, c, m, sizeof m / sizeof m[0]);
  (*env)->DeleteLocalRef(env, c);
  return rc == 0 ? JNI_VERSION_1_6 : JNI_ERR;
}
