/* The three JNI libraries ART 11 loads while it starts (Runtime::InitNativeMethods loads
 * libicu_jni.so, libjavacore.so and libopenjdk.so, and aborts if one is missing). On Android
 * they hold libcore's natives; here they hold the few the test core library (tests/art/core)
 * declares as ours (libopenjdk.so also links heapinfo.cc, Runtime's heap figures, and
 * nativeload.cc, Runtime.nativeLoad). One source,
 * built three times: -DLIB_JAVACORE, -DLIB_OPENJDK, or -DLIB_ICU (libicu_jni.so, which only has
 * to load). */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Registers N natives on CLASS; JNI_OnLoad runs in ART's start-up, which requires the local
 * reference table to be empty again when it returns. */
static inline int register_on(JNIEnv *env, const char *class_name, const JNINativeMethod *m, int n) {
  jclass c = (*env)->FindClass(env, class_name);
  if (c == NULL) return -1;
  int rc = (*env)->RegisterNatives(env, c, m, n);
  (*env)->DeleteLocalRef(env, c);
  return rc == 0 ? 0 : -1;
}

#ifdef LIB_JAVACORE
/* System.logI(String): one line on stdout, where the tests read a program's results. */
static void System_logI(JNIEnv *env, jclass cls, jstring msg) {
  (void)cls;
  const char *s = msg ? (*env)->GetStringUTFChars(env, msg, NULL) : NULL;
  printf("%s\n", s ? s : "null");
  fflush(stdout);
  if (s) (*env)->ReleaseStringUTFChars(env, msg, s);
}

/* Long.toString(long): decimal. */
static jstring Long_toString(JNIEnv *env, jclass cls, jlong v) {
  (void)cls;
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  return (*env)->NewStringUTF(env, buf);
}

/* System.getProperty(key): "java.vm.name" is "Dalvik", as ART reports itself; any other key is
 * looked up in the VM's -Dkey=value options, which VMRuntime.properties() (ART's) returns. */
static jstring System_getProperty(JNIEnv *env, jclass cls, jstring key) {
  (void)cls;
  if (key == NULL) return NULL;
  const char *k = (*env)->GetStringUTFChars(env, key, NULL);
  if (k == NULL) return NULL;
  jstring result = NULL;
  if (strcmp(k, "java.vm.name") == 0) {
    result = (*env)->NewStringUTF(env, "Dalvik");
  } else {
    size_t klen = strlen(k);
    jclass vmr = (*env)->FindClass(env, "dalvik/system/VMRuntime");
    /* properties() is an instance native of ART's that does not look at its VMRuntime. */
    jmethodID props = vmr ? (*env)->GetMethodID(env, vmr, "properties", "()[Ljava/lang/String;") : NULL;
    jobject rt = props ? (*env)->AllocObject(env, vmr) : NULL;
    jobjectArray all = rt ? (jobjectArray)(*env)->CallObjectMethod(env, rt, props) : NULL;
    if (rt) (*env)->DeleteLocalRef(env, rt);
    jsize n = all ? (*env)->GetArrayLength(env, all) : 0;
    for (jsize i = 0; i < n && result == NULL; i++) {
      jstring p = (jstring)(*env)->GetObjectArrayElement(env, all, i);
      const char *pc = p ? (*env)->GetStringUTFChars(env, p, NULL) : NULL;
      if (pc && strncmp(pc, k, klen) == 0 && pc[klen] == '=') result = (*env)->NewStringUTF(env, pc + klen + 1);
      if (pc) (*env)->ReleaseStringUTFChars(env, p, pc);
      if (p) (*env)->DeleteLocalRef(env, p);
    }
    if (all) (*env)->DeleteLocalRef(env, all);
    if (vmr) (*env)->DeleteLocalRef(env, vmr);
  }
  (*env)->ReleaseStringUTFChars(env, key, k);
  return result;
}

static int register_javacore(JNIEnv *env) {
  JNINativeMethod system[] = {
      {"logI", "(Ljava/lang/String;)V", (void *)System_logI},
      {"getProperty", "(Ljava/lang/String;)Ljava/lang/String;", (void *)System_getProperty},
  };
  JNINativeMethod lng[] = {{"toString", "(J)Ljava/lang/String;", (void *)Long_toString}};
  return register_on(env, "java/lang/System", system, 2) || register_on(env, "java/lang/Long", lng, 1);
}
#endif

#ifdef LIB_OPENJDK
/* heapinfo.cc: Runtime.maxMemory/totalMemory/freeMemory from ART's DDM heap-info report. */
int test_runtime_register_heap_natives(JNIEnv *env, jclass runtime_class);
/* nativeload.cc */
jstring test_runtime_native_load(JNIEnv *env, jclass cls, jstring filename, jobject loader, jclass caller);

static int register_openjdk(JNIEnv *env) {
  jclass runtime = (*env)->FindClass(env, "java/lang/Runtime");
  if (runtime == NULL) return -1;
  int rc = test_runtime_register_heap_natives(env, runtime);
  if (rc != 0) fprintf(stderr, "libopenjdk (test): cannot bind Runtime's heap figures to DdmVmInternal.heapInfoNotify\n");
  (*env)->DeleteLocalRef(env, runtime);
  JNINativeMethod m[] = {
      {"nativeLoad", "(Ljava/lang/String;Ljava/lang/ClassLoader;Ljava/lang/Class;)Ljava/lang/String;",
       (void *)test_runtime_native_load},
  };
  return rc || register_on(env, "java/lang/Runtime", m, 1);
}
#endif

JNIEXPORT jint JNI_OnLoad(JavaVM *vm, void *reserved) {
  (void)reserved;
  JNIEnv *env = NULL;
  if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
#if defined(LIB_JAVACORE)
  if (register_javacore(env) != 0) return JNI_ERR;
#elif defined(LIB_OPENJDK)
  if (register_openjdk(env) != 0) return JNI_ERR;
#endif
  return JNI_VERSION_1_6;
}
