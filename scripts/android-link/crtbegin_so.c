/* What the NDK's crtbegin_so.o gives a shared library, for the Android link check
 * (scripts/android-link.sh), written here from bionic's documented behaviour:
 * - __dso_handle: names this library to __cxa_atexit/__cxa_thread_atexit_impl, so handlers it
 *   registers run when it is unloaded;
 * - on unload, __cxa_finalize(&__dso_handle) runs them;
 * - the .note.android.ident note: an ELF note of type 1 named "Android" whose descriptor is the
 *   API level the library was built for (ANDROID_API, from the command line). */
extern void __cxa_finalize(void *);

__attribute__((visibility("hidden"))) void *__dso_handle = &__dso_handle;

__attribute__((destructor, visibility("hidden"))) static void oomguard_unloaded(void) {
  __cxa_finalize(&__dso_handle);
}

__attribute__((section(".note.android.ident"), aligned(4), used)) static const struct {
  unsigned namesz, descsz, type;
  char name[8];
  int api;
} android_ident = {8, 4, 1, "Android", ANDROID_API};
