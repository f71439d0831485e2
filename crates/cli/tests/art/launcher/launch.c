/* art-launch: boots Debian's ART 11 (android-libart) the way an Android app process has it,
 * then runs a static main(String[]) of a class on the boot class path.
 *
 * Usage: art-launch ROOT MAIN_CLASS [VM_OPTION...]
 *   ROOT        a directory; ANDROID_ROOT, ANDROID_ART_ROOT, ANDROID_I18N_ROOT,
 *               ANDROID_TZDATA_ROOT and ANDROID_DATA are set to directories under it.
 *   MAIN_CLASS  binary name with slashes, e.g. "Main" or "dev/oomguard/LeakyApp".
 *   VM_OPTION   passed to JNI_CreateJavaVM as given (-Xbootclasspath:..., -Xmx...).
 *
 * libart.so's NEEDED entries name only the C++ runtime: the libraries it really uses are
 * loaded first, RTLD_GLOBAL, in dependency order. Exit status: 0 when main returned normally,
 * 3 when it threw (after handing the exception to the thread's dispatchUncaughtException, as
 * an app's runtime does), 2 when the VM could not be created, 1 on a usage or loader error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <jni.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ANDROID_LIB "/usr/lib/x86_64-linux-gnu/android/"

static const char *const preload[] = {
    ANDROID_LIB "libsigchain.so.0",
    ANDROID_LIB "liblog.so.0",
    ANDROID_LIB "libbase.so.0",
    "libz.so.1",
    "liblz4.so.1",
    ANDROID_LIB "libziparchive.so.0",
    "/usr/lib/p7zip/7z.so",
    ANDROID_LIB "libunwind.so.0",
    ANDROID_LIB "libbacktrace.so.0",
    ANDROID_LIB "libnativebridge.so.0",
    ANDROID_LIB "libnativeloader.so.0",
    ANDROID_LIB "libnativehelper.so.0",
    ANDROID_LIB "libdexfile_support.so.0",
    /* By its Android file name (the unversioned link Debian ships), as the process maps
     * /apex/com.android.art/lib64/libart.so on a device: oomguard finds libart by that name. */
    ANDROID_LIB "libart.so",
};

static int make_dir(const char *root, const char *name, const char *var) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, name);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "art-launch: mkdir %s: %s\n", path, strerror(errno));
    return -1;
  }
  setenv(var, path, 1);
  return 0;
}

/* Prints "art-launch: main threw CLASS: MESSAGE" and the causes: the class name from ART's
 * own Class.getNameNative, the message from Throwable.detailMessage. */
static void describe_throwable(JNIEnv *env, jthrowable t) {
  jclass throwable = (*env)->FindClass(env, "java/lang/Throwable");
  jfieldID msg_f = (*env)->GetFieldID(env, throwable, "detailMessage", "Ljava/lang/String;");
  jfieldID cause_f = (*env)->GetFieldID(env, throwable, "cause", "Ljava/lang/Throwable;");
  jclass class_class = (*env)->FindClass(env, "java/lang/Class");
  jmethodID name_m = (*env)->GetMethodID(env, class_class, "getNameNative", "()Ljava/lang/String;");
  const char *what = "main threw";
  for (int depth = 0; t != NULL && depth < 8; depth++) {
    jclass tc = (*env)->GetObjectClass(env, t);
    jstring name = name_m ? (jstring)(*env)->CallObjectMethod(env, tc, name_m) : NULL;
    jstring msg = msg_f ? (jstring)(*env)->GetObjectField(env, t, msg_f) : NULL;
    const char *n = name ? (*env)->GetStringUTFChars(env, name, NULL) : "?";
    const char *m = msg ? (*env)->GetStringUTFChars(env, msg, NULL) : NULL;
    fprintf(stderr, "art-launch: %s %s%s%s\n", what, n, m ? ": " : "", m ? m : "");
    jthrowable cause = cause_f ? (jthrowable)(*env)->GetObjectField(env, t, cause_f) : NULL;
    t = (cause != NULL && !(*env)->IsSameObject(env, cause, t)) ? cause : NULL;
    what = "  caused by";
  }
}

/* What an app's runtime does with an exception no frame of the thread caught (ART does it when
 * a thread detaches): Thread.currentThread().dispatchUncaughtException(t), which calls the
 * default handler if one was set. Whatever it throws is cleared. */
static void dispatch_uncaught(JNIEnv *env, jthrowable t) {
  jclass thread = (*env)->FindClass(env, "java/lang/Thread");
  jmethodID cur = thread ? (*env)->GetStaticMethodID(env, thread, "currentThread", "()Ljava/lang/Thread;") : NULL;
  jmethodID dispatch = thread ? (*env)->GetMethodID(env, thread, "dispatchUncaughtException", "(Ljava/lang/Throwable;)V") : NULL;
  jobject self = cur ? (*env)->CallStaticObjectMethod(env, thread, cur) : NULL;
  if (self != NULL && dispatch != NULL) (*env)->CallVoidMethod(env, self, dispatch, t);
  if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
}

typedef jint (*create_vm_fn)(JavaVM **, JNIEnv **, void *);

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ROOT MAIN_CLASS [VM_OPTION...]\n", argv[0]);
    return 1;
  }
  const char *root = argv[1];
  const char *main_class = argv[2];
  if (make_dir(root, "", "ANDROID_ROOT") || make_dir(root, "art", "ANDROID_ART_ROOT") ||
      make_dir(root, "i18n", "ANDROID_I18N_ROOT") || make_dir(root, "tzdata", "ANDROID_TZDATA_ROOT") ||
      make_dir(root, "data", "ANDROID_DATA")) {
    return 1;
  }
  /* The boot image would be looked for in ANDROID_DATA's dalvik-cache; ART wants it to exist. */
  char cache[4096];
  snprintf(cache, sizeof cache, "%s/data/dalvik-cache", root);
  mkdir(cache, 0755);
  snprintf(cache, sizeof cache, "%s/data/dalvik-cache/x86_64", root);
  mkdir(cache, 0755);

  void *art = NULL;
  for (size_t i = 0; i < sizeof preload / sizeof preload[0]; i++) {
    art = dlopen(preload[i], RTLD_NOW | RTLD_GLOBAL);
    if (art == NULL) {
      fprintf(stderr, "art-launch: dlopen %s: %s\n", preload[i], dlerror());
      return 1;
    }
  }
  create_vm_fn create = (create_vm_fn)dlsym(art, "JNI_CreateJavaVM");
  if (create == NULL) {
    fprintf(stderr, "art-launch: JNI_CreateJavaVM: %s\n", dlerror());
    return 1;
  }

  int n = argc - 3;
  JavaVMOption *options = calloc((size_t)n + 1, sizeof *options);
  for (int i = 0; i < n; i++) options[i].optionString = argv[3 + i];
  JavaVMInitArgs args = {.version = JNI_VERSION_1_6, .nOptions = n, .options = options, .ignoreUnrecognized = JNI_FALSE};
  JavaVM *vm = NULL;
  JNIEnv *env = NULL;
  jint rc = create(&vm, &env, &args);
  if (rc != JNI_OK) {
    fprintf(stderr, "art-launch: JNI_CreateJavaVM returned %d\n", rc);
    return 2;
  }
  fprintf(stderr, "art-launch: VM created\n");

  jclass cls = (*env)->FindClass(env, main_class);
  if (cls == NULL) {
    fprintf(stderr, "art-launch: class %s not found\n", main_class);
    if ((*env)->ExceptionCheck(env)) (*env)->ExceptionDescribe(env);
    return 3;
  }
  jmethodID m = (*env)->GetStaticMethodID(env, cls, "main", "([Ljava/lang/String;)V");
  if (m == NULL) {
    fprintf(stderr, "art-launch: %s has no static main(String[])\n", main_class);
    return 3;
  }
  (*env)->CallStaticVoidMethod(env, cls, m, NULL);
  if ((*env)->ExceptionCheck(env)) {
    jthrowable t = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
    dispatch_uncaught(env, t);
    describe_throwable(env, t);
    fflush(NULL);
    _exit(3);
  }
  fprintf(stderr, "art-launch: main returned\n");
  fflush(NULL);
  /* No DestroyJavaVM: without daemon threads there is nothing to wait for, and the
   * process's exit is what an app's death looks like. */
  _exit(0);
}
