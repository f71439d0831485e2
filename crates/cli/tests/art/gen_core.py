#!/usr/bin/env python3
"""Writes the smali sources of the test core library that boots ART 11 (see tests/art/README.md).

Inputs, all in tests/art/core/:
  classes.txt     one block per class: its declaration, fields and methods (format below);
  natives.txt     the natives ART 11's RegisterRuntimeNativeMethods binds: CLASS KIND FLAG NAME+SIG
                  (KIND static|virtual; FLAG -|fast|critical), from runtime/native/*.cc;
  intrinsics.txt  the methods InitializeIntrinsics looks up: CLASS KIND NAME+SIG (KIND
                  Static|Direct|Virtual|Polymorphic), from runtime/intrinsics_list.h;
  hand/*.smali    classes with real code, written by hand; natives and intrinsics of the tables
                  that such a file lacks are appended to it;
  code/*.smali    bodies of the few methods with real code in classes.txt's classes.
Output: one .smali per class under the directory given as argv[1].

classes.txt format (# starts a comment):
  class FLAGS NAME [: SUPER] [< IFACE,IFACE]   FLAGS like public,final / public,interface,abstract
    f FLAGS NAME TYPE [= VALUE]                a field (static if FLAGS has static; "-": no flags)
    m FLAGS NAME(ARGS)RET [super]              a method; its body is trivial (returns 0/null/void;
                                               a constructor calls its superclass's <init>()V, or
                                               with "super" the one of its own signature)
    m FLAGS NAME(ARGS)RET @NAME                a method with real code: its body (.registers on)
                                               is core/code/NAME.smali
    vtable N                                   check: the class adds N virtual methods
  class+ NAME                                  adds lines to a class declared above
Names use slashes (java/lang/Object); a class without ": SUPER" extends java/lang/Object
(java/lang/Object itself has none).
Trivial bodies are fine here: ART only needs those methods to exist, with the right signature
and kind, and the test programs do not call them.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = os.path.join(HERE, "core")

# (class, name+sig) -> the annotation natives.txt's FLAG asks for. ART's implementations of
# @FastNative methods run without a thread state change (they touch objects as a runnable
# thread) and those of @CriticalNative methods take no JNIEnv or class: without the annotation
# ART would call them as plain JNI methods, in the native state, where a concurrent GC moves the
# objects they hold (Thread.sleep then aborts the runtime: a monitor's lock word found forwarded,
# or a thread "transitioning to runnable with checkpoint flag").
NATIVE_ANNOTATIONS = {}
ANNOTATION_OF_FLAG = {
    "fast": "Ldalvik/annotation/optimization/FastNative;",
    "critical": "Ldalvik/annotation/optimization/CriticalNative;",
}


def flag_list(word):
    """FLAGS as written: comma-separated, or "-" for none (package-private)."""
    return [] if word == "-" else word.split(",")


def parse_classes(path):
    classes = {}
    order = []
    cur = None
    for lineno, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        words = line.split()
        if words[0] == "class+":
            if len(words) != 2 or words[1] not in classes:
                sys.exit(f"{path}:{lineno}: class+ names no class declared above")
            cur = classes[words[1]]
        elif words[0] == "vtable" and cur is not None:
            cur["vtable"] = int(words[1])
        elif words[0] == "class":
            m = re.match(r"class\s+(\S+)\s+(\S+)(?:\s*:\s*(\S+))?(?:\s*<\s*(\S+))?\s*$", line)
            if not m:
                sys.exit(f"{path}:{lineno}: bad class line")
            flags, name, sup, ifaces = m.groups()
            if name in classes:
                sys.exit(f"{path}:{lineno}: {name} declared twice")
            if sup is None and name != "java/lang/Object":
                sup = "java/lang/Object"
            cur = {"name": name, "flags": flags.split(","), "super": sup,
                   "ifaces": ifaces.split(",") if ifaces else [], "fields": [], "methods": []}
            classes[name] = cur
            order.append(name)
        elif words[0] == "f" and cur is not None:
            value = None
            if "=" in words:
                i = words.index("=")
                value = " ".join(words[i + 1:])
                words = words[:i]
            if len(words) != 4:
                sys.exit(f"{path}:{lineno}: bad field line")
            cur["fields"].append((flag_list(words[1]), words[2], words[3], value))
        elif words[0] == "m" and cur is not None:
            flags = flag_list(words[1])
            if len(words) == 4 and words[3] == "super" and words[2].startswith("<init>"):
                flags.append("@super")
            elif len(words) == 4 and words[3].startswith("@"):
                # Real code: the body is in core/code/NAME.smali.
                flags.append("@code=" + words[3][1:])
            elif len(words) != 3:
                sys.exit(f"{path}:{lineno}: bad method line")
            cur["methods"].append((flags, words[2]))
        else:
            sys.exit(f"{path}:{lineno}: cannot read {line!r}")
    return classes, order


def desc(name):
    return f"L{name};"


def trivial_body(cls, flags, name, sig):
    ret = sig[sig.index(")") + 1:]
    out = []
    if name == "<init>":
        nargs = arg_words(sig) + 1
        out.append(f"    .registers {nargs}")
        if cls["super"] is not None:
            if "@super" in flags:
                # Passes its arguments on to the superclass's constructor of the same signature.
                out.append(f"    invoke-direct/range {{p0 .. p{nargs - 1}}}, {desc(cls['super'])}-><init>{sig}")
            else:
                out.append(f"    invoke-direct {{p0}}, {desc(cls['super'])}-><init>()V")
        out.append("    return-void")
        return out
    nargs = arg_words(sig) + (0 if "static" in flags else 1)
    regs = 2 + nargs
    if ret == "V":
        return [f"    .registers {nargs}", "    return-void"]
    if ret in ("J", "D"):
        return [f"    .registers {regs}", "    const-wide/16 v0, 0x0", "    return-wide v0"]
    if ret.startswith("L") or ret.startswith("["):
        return [f"    .registers {regs}", "    const/4 v0, 0x0", "    return-object v0"]
    return [f"    .registers {regs}", "    const/4 v0, 0x0", "    return v0"]


def arg_words(sig):
    args = sig[sig.index("(") + 1:sig.index(")")]
    n = 0
    i = 0
    while i < len(args):
        c = args[i]
        if c in "JD":
            n += 2
            i += 1
        elif c == "L":
            n += 1
            i = args.index(";", i) + 1
        elif c == "[":
            while args[i] == "[":
                i += 1
            if args[i] == "L":
                i = args.index(";", i) + 1
            else:
                i += 1
            n += 1
        else:
            n += 1
            i += 1
    return n


def method_smali(cls, flags, namesig):
    name = namesig[:namesig.index("(")]
    sig = namesig[namesig.index("("):]
    if name == "<init>" and "constructor" not in flags:
        flags = flags + ["constructor"]
    if name == "<clinit>":
        flags = [f for f in flags if f not in ("public", "private", "protected")]
        flags = list(dict.fromkeys(flags + ["static", "constructor"]))
    out = [f".method {' '.join(f for f in flags if not f.startswith('@'))} {name}{sig}"]
    code = [f[len("@code="):] for f in flags if f.startswith("@code=")]
    if code:
        body = open(os.path.join(CORE, "code", code[0] + ".smali")).read().rstrip("\n")
        out += body.split("\n")
    elif "native" not in flags and "abstract" not in flags:
        out += trivial_body(cls, flags, name, sig)
    annotation = NATIVE_ANNOTATIONS.get((cls["name"], namesig))
    if annotation and "native" in flags:
        out += [f"    .annotation build {annotation}", "    .end annotation"]
    out.append(".end method")
    return "\n".join(out) + "\n"


def extra_methods(natives, intrinsics, name, fixed_vtable=False):
    """Methods the tables ask of class NAME: (flags, name+sig)."""
    out = []
    virtual_intrinsics = set(ns for kind, ns in intrinsics.get(name, []) if kind == "Virtual")
    direct_intrinsics = set(ns for kind, ns in intrinsics.get(name, []) if kind == "Direct")
    for kind, flag, namesig in natives.get(name, []):
        # An instance native of a class whose vtable length ART checks (Object, Class, String)
        # is private (a direct method) unless an intrinsic wants it virtual; elsewhere public
        # unless an intrinsic wants it direct.
        if kind == "static":
            flags = ["public", "static", "native"]
        elif namesig in direct_intrinsics:
            flags = ["private", "native"]
        elif namesig in virtual_intrinsics or not fixed_vtable:
            flags = ["public", "native"]
        else:
            flags = ["private", "native"]
        if flag == "critical":
            flags.append("# @CriticalNative in libcore")
        out.append((flags, namesig))
    for kind, namesig in intrinsics.get(name, []):
        if kind == "Static":
            flags = ["public", "static"]
        elif kind == "Direct":
            flags = ["private"]
        elif kind == "Polymorphic":
            flags = ["public", "final", "native", "varargs"]
        else:
            flags = ["public"]
        out.append((flags, namesig))
    return out


def load_table(path, width):
    table = {}
    for raw in open(path):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) != width:
            sys.exit(f"{path}: bad line {raw!r}")
        table.setdefault(line[0], []).append(tuple(line[1:]))
    return table


def new_virtuals(methods, object_virtuals):
    """How many vtable entries a direct subclass of Object adds with these methods."""
    n = 0
    for flags, namesig in methods:
        if "static" in flags or "private" in flags or namesig.startswith("<"):
            continue
        if namesig not in object_virtuals:
            n += 1
    return n


def class_smali(cls, natives, intrinsics, object_virtuals):
    out = [f".class {' '.join(cls['flags'])} {desc(cls['name'])}"]
    if cls["super"] is not None:
        out.append(f".super {desc(cls['super'])}")
    for i in cls["ifaces"]:
        out.append(f".implements {desc(i)}")
    out.append("")
    for flags, fname, ftype, value in cls["fields"]:
        v = f" = {value}" if value is not None else ""
        out.append(f".field {' '.join(flags)} {fname}:{ftype}{v}")
    out.append("")
    seen = set()
    methods = list(cls["methods"])
    for flags, namesig in methods:
        seen.add(namesig)
    for flags, namesig in extra_methods(natives, intrinsics, cls["name"], "vtable" in cls):
        if namesig not in seen:
            methods.append(([f for f in flags if not f.startswith("#")], namesig))
            seen.add(namesig)
    if not any(ns.startswith("<init>(") for _, ns in methods) and "interface" not in cls["flags"]:
        methods.insert(0, (["public"], "<init>()V"))
    if "vtable" in cls:
        n = new_virtuals(methods, object_virtuals if cls["name"] != "java/lang/Object" else set())
        if n != cls["vtable"]:
            sys.exit(f"{cls['name']}: {n} new virtual methods, ART expects {cls['vtable']}")
    for flags, namesig in methods:
        out.append(method_smali(cls, flags, namesig))
    return "\n".join(out) + "\n"


def hand_declared(text):
    return set(m.group(1) for m in re.finditer(r"^\.method [^\n]*?(\S+\(\S*)$", text, re.M))


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    classes, order = parse_classes(os.path.join(CORE, "classes.txt"))
    natives = load_table(os.path.join(CORE, "natives.txt"), 4)
    natives = {k: [(a, b, c) for a, b, c in v] for k, v in natives.items()}
    for cname, rows in natives.items():
        for _, flag, namesig in rows:
            if flag in ANNOTATION_OF_FLAG:
                NATIVE_ANNOTATIONS[(cname, namesig)] = ANNOTATION_OF_FLAG[flag]
    intrinsics = load_table(os.path.join(CORE, "intrinsics.txt"), 3)
    hand = {}
    hand_dir = os.path.join(CORE, "hand")
    for root, _, files in os.walk(hand_dir):
        for f in files:
            if f.endswith(".smali"):
                text = open(os.path.join(root, f)).read()
                name = re.search(r"^\.class .*?L([^;]+);", text, re.M).group(1)
                hand[name] = text
    dup = set(hand) & set(classes)
    if dup:
        sys.exit(f"both in classes.txt and hand/: {sorted(dup)}")
    wanted = set(natives) | set(intrinsics)
    missing = wanted - set(classes) - set(hand)
    if missing:
        sys.exit(f"the tables name classes nobody declares: {sorted(missing)}")
    object_virtuals = set(ns for fl, ns in classes["java/lang/Object"]["methods"]
                          if "static" not in fl and "private" not in fl and not ns.startswith("<"))
    written = 0
    for name in order:
        path = os.path.join(outdir, name.replace("/", "_").replace("$", "_") + ".smali")
        with open(path, "w") as f:
            f.write(class_smali(classes[name], natives, intrinsics, object_virtuals))
        written += 1
    for name, text in hand.items():
        declared = hand_declared(text)
        extra = [(fl, ns) for fl, ns in extra_methods(natives, intrinsics, name) if ns not in declared]
        cls = {"name": name, "super": None}
        body = "".join("\n" + method_smali(cls, [f for f in fl if not f.startswith("#")], ns)
                       for fl, ns in extra)
        path = os.path.join(outdir, name.replace("/", "_").replace("$", "_") + ".smali")
        with open(path, "w") as f:
            f.write(text + body)
        written += 1
    print(f"gen_core: {written} classes", file=sys.stderr)


if __name__ == "__main__":
    main()
