// Runtime.nativeLoad for the test core library, part of our libopenjdk.so. Android's
// libopenjdk implements it through libopenjdkjvm's JVM_NativeLoad, which calls
// art::JavaVMExt::LoadNativeLibrary; Debian ships no libopenjdkjvm, but libart exports that
// function, so this calls it the same way: the library is opened through libnativeloader,
// its JNI_OnLoad runs, and its Java_* symbols then resolve the class's natives.
#include <jni.h>

#include <string>

// Android's jni.h names the C++ JNIEnv struct _JNIEnv, which libart's mangled names carry; the
// JDK's jni.h used here names it JNIEnv_. Same layout: the call passes it as Android's type.
struct _JNIEnv;

namespace art {
// Only the member called here is declared; the JavaVM ART hands out is a JavaVMExt.
class JavaVMExt {
 public:
  bool LoadNativeLibrary(_JNIEnv* env, const std::string& path, jobject class_loader,
                         jclass caller_class, std::string* error_msg);
};
}  // namespace art

extern "C" jstring test_runtime_native_load(JNIEnv* env, jclass, jstring filename,
                                            jobject class_loader, jclass caller) {
  const char* chars = env->GetStringUTFChars(filename, nullptr);
  if (chars == nullptr) return env->NewStringUTF("nativeLoad: no file name");
  std::string path(chars);
  env->ReleaseStringUTFChars(filename, chars);
  JavaVM* vm = nullptr;
  if (env->GetJavaVM(&vm) != JNI_OK) return env->NewStringUTF("nativeLoad: no JavaVM");
  std::string error;
  if (reinterpret_cast<art::JavaVMExt*>(vm)->LoadNativeLibrary(
          reinterpret_cast<_JNIEnv*>(env), path, class_loader, caller, &error)) {
    return nullptr;
  }
  return env->NewStringUTF(error.c_str());
}
