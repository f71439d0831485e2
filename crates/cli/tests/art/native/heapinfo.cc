// java.lang.Runtime's heap figures for the test core library, part of our libopenjdk.so.
//
// Android's libopenjdk answers maxMemory/totalMemory/freeMemory through libopenjdkjvm's
// JVM_MaxMemory/JVM_TotalMemory/JVM_FreeMemory (gc::Heap's inline GetMaxMemory(),
// GetTotalMemory() and GetFreeMemory()). Debian ships no libopenjdkjvm (`dpkg -L
// android-libart`: libart, libdexfile_*, libsigchain), and libart exports no JVM_* function and
// neither of the two inline ones. It does export ART's DDM heap-info report, which the
// debugger's "HPIF" chunk carries: `Dbg::DdmSendHeapInfo` puts GetMaxMemory(), GetTotalMemory()
// and GetBytesAllocated() in one chunk and hands it to every `art::DdmCallback` registered with
// `RuntimeCallbacks::AddDdmCallback` (both exported, as is `Runtime::GetRuntimeCallbacks()`).
// So: one DdmCallback of ours is registered; each figure asks ART for the report through its
// own native `DdmVmInternal.heapInfoNotify(HPIF_WHEN_NOW)`, which publishes it synchronously on
// the calling thread, and reads it from there. No offset into ART's objects is used; the
// chunk's layout is the DDM protocol's (big-endian, checked by its type and length).
//
// The chunk's sizes are 32-bit (the protocol's): the test runtime's heaps are far below 4 GiB.
// A missing report aborts the VM with the reason (JNIEnv::FatalError): never a made-up figure.
#include <jni.h>
#include <stddef.h>
#include <stdint.h>

#include <mutex>

namespace art {

// The layout of ART's ArrayRef<T>: a pointer and a size.
template <typename T>
class ArrayRef {
 public:
  T* data() const { return array_; }
  size_t size() const { return size_; }

 private:
  T* array_;
  size_t size_;
};

// As runtime/runtime_callbacks.h declares it: a virtual destructor, then the one method.
class DdmCallback {
 public:
  virtual ~DdmCallback() {}
  virtual void DdmPublishChunk(uint32_t type, const ArrayRef<const uint8_t>& data) = 0;
};

// Only the exported members called here are declared.
class RuntimeCallbacks {
 public:
  void AddDdmCallback(DdmCallback* cb);
};

class Runtime {
 public:
  RuntimeCallbacks* GetRuntimeCallbacks();
  static Runtime* instance_;
};

}  // namespace art

namespace {

constexpr uint32_t kChunkHpif = ('H' << 24) | ('P' << 16) | ('I' << 8) | 'F';
// [u4 heap count] then per heap [u4 id][u8 time][u1 reason][u4 max][u4 total][u4 allocated]
// [u4 objects]: ART reports one heap.
constexpr size_t kHpifBytes = 4 + (4 + 8 + 1 + 4 + 4 + 4 + 4);
constexpr jint kHpifWhenNow = 1;

struct HeapInfo {
  bool got;
  uint64_t max, total, allocated;
};

// The report reaches the callback on the thread that asked for it.
thread_local HeapInfo t_info;

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

class HeapInfoCallback : public art::DdmCallback {
 public:
  void DdmPublishChunk(uint32_t type, const art::ArrayRef<const uint8_t>& data) override {
    if (type != kChunkHpif || data.size() != kHpifBytes || be32(data.data()) != 1) return;
    const uint8_t* heap = data.data() + 4 + 4 + 8 + 1;
    t_info = HeapInfo{true, be32(heap), be32(heap + 4), be32(heap + 8)};
  }
};

HeapInfoCallback g_callback;
std::once_flag g_registered;
jclass g_ddm;
jmethodID g_notify;

// ART's HPIF report, asked for on this thread.
HeapInfo heap_info(JNIEnv* env) {
  std::call_once(g_registered, [] {
    art::Runtime* rt = art::Runtime::instance_;
    if (rt != nullptr) rt->GetRuntimeCallbacks()->AddDdmCallback(&g_callback);
  });
  t_info = HeapInfo{false, 0, 0, 0};
  jboolean handled = env->CallStaticBooleanMethod(g_ddm, g_notify, kHpifWhenNow);
  if (env->ExceptionCheck()) return t_info;  // thrown on to the caller of Runtime.*Memory
  if (!handled || !t_info.got) {
    env->FatalError("libopenjdk (test): DdmVmInternal.heapInfoNotify(HPIF_WHEN_NOW) published no HPIF chunk");
  }
  return t_info;
}

jlong Runtime_maxMemory(JNIEnv* env, jobject) { return static_cast<jlong>(heap_info(env).max); }

jlong Runtime_totalMemory(JNIEnv* env, jobject) { return static_cast<jlong>(heap_info(env).total); }

// As ART's GetFreeMemory(): total less bytes allocated, never below 0.
jlong Runtime_freeMemory(JNIEnv* env, jobject) {
  HeapInfo h = heap_info(env);
  return static_cast<jlong>(h.total > h.allocated ? h.total - h.allocated : 0);
}

}  // namespace

// Looks up DdmVmInternal.heapInfoNotify and registers the three natives on java.lang.Runtime;
// called from JNI_OnLoad (jnilib.c). 0 on success.
extern "C" int test_runtime_register_heap_natives(JNIEnv* env, jclass runtime_class) {
  jclass ddm = env->FindClass("org/apache/harmony/dalvik/ddmc/DdmVmInternal");
  if (ddm == nullptr) return -1;
  g_notify = env->GetStaticMethodID(ddm, "heapInfoNotify", "(I)Z");
  g_ddm = static_cast<jclass>(env->NewGlobalRef(ddm));
  env->DeleteLocalRef(ddm);
  if (g_notify == nullptr || g_ddm == nullptr) return -1;
  JNINativeMethod m[] = {
      {const_cast<char*>("maxMemory"), const_cast<char*>("()J"), reinterpret_cast<void*>(Runtime_maxMemory)},
      {const_cast<char*>("totalMemory"), const_cast<char*>("()J"), reinterpret_cast<void*>(Runtime_totalMemory)},
      {const_cast<char*>("freeMemory"), const_cast<char*>("()J"), reinterpret_cast<void*>(Runtime_freeMemory)},
  };
  return env->RegisterNatives(runtime_class, m, 3) == JNI_OK ? 0 : -1;
}
