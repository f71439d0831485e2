#!/usr/bin/env python3
"""Stub system libraries for linking liboomguard.so for Android without an NDK
(scripts/android-link.sh).

Usage: bionic_stubs.py FACTS ABI API CLANG_TARGET OUT_DIR

Writes OUT_DIR/{libc,libm,libdl,liblog}.so: shared libraries that export, with the symbol version
bionic gives them (LIBC for libc, libm and libdl; LIBLOG for liblog), exactly the symbols FACTS
(scripts/abi/bionic-api.txt) says that library exports on ABI at API level API or below. Like the
NDK's own stubs for that level, they hold no code: they only tell the linker what the device's
libraries define. Linked against them with `-z defs`, a hard import the device at API does not
have fails the link; a weak reference to a newer symbol stays undefined and unversioned, to be
looked up at run time. A symbol FACTS does not list is not in the stubs either, so it fails the
link too until its fact is added (as scripts/abi-check.sh asks).
"""
import os
import subprocess
import sys

from abi_check import ABIS, facts as read_facts  # the facts file's one reader

VERSION = {"libc": "LIBC", "libm": "LIBC", "libdl": "LIBC", "liblog": "LIBLOG"}


def exported(facts, abi, api):
    libs = {lib: [] for lib in VERSION}
    for name, (lib, levels) in read_facts(facts).items():
        if lib not in VERSION:
            continue  # ndk-static: linked into the .so, not found on the device
        level = levels[abi]
        if level == "-" or (level != "base" and int(level) > api):
            continue
        libs[lib].append(name)
    return libs


def main():
    facts, abi, api, target, out = sys.argv[1:6]
    if abi not in ABIS:
        sys.exit(f"bionic_stubs: unknown ABI {abi} (one of {', '.join(ABIS)})")
    os.makedirs(out, exist_ok=True)
    for lib, names in exported(facts, abi, int(api)).items():
        src, script = os.path.join(out, lib + ".c"), os.path.join(out, lib + ".map")
        with open(src, "w") as f:
            f.write("".join(f"void {n}(void) {{}}\n" for n in sorted(names)))
        with open(script, "w") as f:
            body = "".join(f"    {n};\n" for n in sorted(names))
            f.write(f"{VERSION[lib]} {{\n  global:\n{body}  local:\n    *;\n}};\n")
        subprocess.run(["clang", f"--target={target}", "-shared", "-nostdlib", "-fuse-ld=lld",
                        "-fno-builtin", f"-Wl,--version-script={script}", f"-Wl,-soname,{lib}.so",
                        "-o", os.path.join(out, lib + ".so"), src], check=True)
        print(f"bionic_stubs: {out}/{lib}.so: {len(names)} symbols ({VERSION[lib]}, {abi}, API {api})")


if __name__ == "__main__":
    main()
