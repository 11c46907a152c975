#!/usr/bin/env python3
"""gen-driver.py: the rest of the driver API, derived from cuda.h.

libcicada.so must export every function the CUDA driver exports (the
stub libcuda.so lists them), so that no program fails to load and no
library's dlsym or cuGetProcAddress finds a hole. calls.tbl and the
hand-written interposer serve most of what programs call; this script
makes the rest from the header's own prototypes (wire/cuda_h.py):

  gen-driver.py ptds    CC INCLUDE STUB OBJ...  -> C: the _ptds/_ptsz forms
      of functions the interposer serves: the same call on the per-thread
      default stream (a NULL stream becomes CU_STREAM_PER_THREAD); and the
      old ABI names of served _v2/_v3 functions with the same parameters.
  gen-driver.py missing CC INCLUDE STUB OBJ...  -> C: every other exported
      name, failing cleanly: CUDA_ERROR_NOT_SUPPORTED, and its name logged
      once at warn level when called.
  gen-driver.py rename  CC INCLUDE STUB OBJ...  -> text: for objcopy
      --redefine-syms, "cuX impl_cuX" for each function the objects serve:
      the build renames their definitions (and their own calls to them).
  gen-driver.py trace   CC INCLUDE STUB OBJ...  -> C: the exported function
      of each of those, which calls impl_cuX and reports a failure (or,
      with CICADA_TRACE=1, every result) to interposer/trace.c; so every
      way in (a link, dlsym, cuGetProcAddress) says which call failed.
  gen-driver.py sweep   CC INCLUDE STUB         -> C: the never-crash sweep
      (tests/tools), which calls every exported function with NULL, zero
      and invalid arguments (the graphics interop ones, which Cicada does
      not serve, with none).
  gen-driver.py list    CC INCLUDE STUB OBJ...  -> text: each exported name
      and how it is served (interposer, ptds, old, missing).

STUB is the stub libcuda.so; OBJ... the interposer's other objects (what
they define is served already).
"""
import subprocess
import sys

import cuda_h

PT_SUFFIXES = ("_ptds", "_ptsz")


def exported(stub, include=None):
    """The driver API's names: what the stub libcuda.so exports (not the
    debugger's cudbg* hooks), and the graphics interop names, which some
    stubs leave out though every driver exports them."""
    out = subprocess.run(["nm", "-D", "--defined-only", stub], check=True, capture_output=True,
                         text=True).stdout
    names = {l.split()[-1] for l in out.splitlines() if l.split() and l.split()[-1].startswith("cu")}
    names = {n for n in names if not n.startswith("cudbg")}
    if include:
        names |= cuda_h.interop_names(include)
    return sorted(names)


def defined(objs):
    if not objs:
        return set()
    out = subprocess.run(["nm", "--defined-only"] + objs, check=True, capture_output=True, text=True).stdout
    return {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3 and l.split()[1] == "T"}


def same_params(protos, a, b):
    """Whether a and b take the same parameter types (an old ABI name whose
    newer version differs only in name)."""
    pa, pb = protos.get(a), protos.get(b)
    return pa is not None and pb is not None and \
        [q.type for q in pa.params] == [q.type for q in pb.params]


def newer(protos, n, have):
    """The served newer version (_v2, _v3) of old ABI name n, or None."""
    for v in ("_v2", "_v3"):
        if n + v in have and same_params(protos, n, n + v):
            return n + v
    return None


def classify(names, have, protos=None):
    """name -> 'interposer', 'ptds' (a form of a served base), 'old' (an old
    ABI name of a served newer version with the same parameters) or
    'missing'."""
    kinds = {}
    for n in names:
        if n in have:
            kinds[n] = "interposer"
        elif n.endswith(PT_SUFFIXES) and n[:-5] in have:
            kinds[n] = "ptds"
        elif protos and newer(protos, n, have):
            kinds[n] = "old"
        else:
            kinds[n] = "missing"
    return kinds


def gen_ptds(protos, kinds):
    out = ["/* Generated from cuda.h by wire/gen-driver.py: do not edit. The per-thread\n"
           " * default stream forms of the functions the interposer serves. Each calls\n"
           " * its base symbol by its exported name (cuda.h's macros would rename it). */\n",
           "#include <cuda.h>\n\n"]
    for i, n in enumerate(sorted(k for k, v in kinds.items() if v == "ptds")):
        p = protos[n]
        decl = ", ".join(q.decl() if q.name else q.type for q in p.params) or "void"
        args = [q.name for q in p.params]
        s = p.stream_param()
        out.append("CUresult base_%d(%s) __asm__(\"%s\");\n" % (i, decl, n[:-5]))
        out.append("CUresult CUDAAPI %s(%s) __asm__(\"%s\");\n" % ("ptds_%d" % i, decl, n))
        out.append("CUresult CUDAAPI ptds_%d(%s)\n{\n" % (i, decl))
        if s >= 0 and n.endswith("_ptsz"):
            out.append("\tif (!%s)\n\t\t%s = CU_STREAM_PER_THREAD;\n" % (args[s], args[s]))
        out.append("\treturn base_%d(%s);\n}\n\n" % (i, ", ".join(args)))
    return "".join(out)


def gen_old(protos, kinds, have):
    """Old ABI names (cuDevicePrimaryCtxReset, ...) calling their served
    newer version, which takes the same parameters."""
    out = []
    for i, n in enumerate(sorted(k for k, v in kinds.items() if v == "old")):
        p, target = protos[n], newer(protos, n, have)
        decl = ", ".join(q.decl() if q.name else q.type for q in p.params) or "void"
        out.append("CUresult newer_%d(%s) __asm__(\"%s\");\n" % (i, decl, target))
        out.append("CUresult CUDAAPI old_%d(%s) __asm__(\"%s\");\n" % (i, decl, n))
        out.append("CUresult CUDAAPI old_%d(%s)\n{\n\treturn newer_%d(%s);\n}\n\n"
                   % (i, decl, i, ", ".join(q.name for q in p.params)))
    return "".join(out)


def gen_missing(kinds):
    out = ["/* Generated from cuda.h by wire/gen-driver.py: do not edit. Driver functions\n"
           " * Cicada does not serve: each fails cleanly and is named once at warn level.\n"
           " * No prototypes: a function that ignores its arguments needs none. */\n",
           "typedef int CUresult;\n",
           "void log_missing_once(const char *what, const char *name, int called);\n\n",
           "#define CUDA_ERROR_NOT_SUPPORTED 801\n\n"]
    for n in sorted(k for k, v in kinds.items() if v == "missing"):
        out.append("CUresult %s(void);\nCUresult %s(void)\n{\n\tlog_missing_once(\"driver function\", \"%s\", 1);\n"
                   "\treturn CUDA_ERROR_NOT_SUPPORTED;\n}\n\n" % (n, n, n))
    return "".join(out)


def served_here(protos, kinds):
    """The exported functions the hand-written objects define."""
    return sorted(k for k, v in kinds.items() if v == "interposer" and k in protos)


def gen_rename(protos, kinds):
    return "".join("%s impl_%s\n" % (n, n) for n in served_here(protos, kinds))


def gen_trace(protos, kinds):
    served = served_here(protos, kinds)
    out = ["/* Generated from cuda.h by wire/gen-driver.py: do not edit. The exported\n"
           " * driver functions the interposer serves: each calls its implementation\n"
           " * (renamed impl_cuX at build time) and reports a failure to trace.c. */\n",
           "#include <cuda.h>\n#include <cudaProfiler.h>\n#include \"trace.h\"\n\n"]
    for i, n in enumerate(served):
        p = protos[n]
        decl = ", ".join(q.decl() if q.name else q.type for q in p.params) or "void"
        args = ", ".join(q.name for q in p.params)
        out.append("CUresult impl_%d(%s) __asm__(\"impl_%s\");\n" % (i, decl, n))
        out.append("CUresult CUDAAPI export_%d(%s) __asm__(\"%s\");\n" % (i, decl, n))
        out.append("CUresult CUDAAPI export_%d(%s)\n{\n\tuint64_t t0 = trace_every & TRACE_COUNT ? "
                   "trace_clock() : 0;\n\tCUresult r = impl_%d(%s);\n\n"
                   "\tif (__builtin_expect(r || trace_every, 0))\n\t\ttrace_result(%d, r, t0);\n\treturn r;\n}\n\n"
                   % (i, decl, i, args, i))
    out.append("const char *const trace_names[] = {\n")
    for n in served:
        out.append("\t\"%s\",\n" % n)
    out.append("};\nconst unsigned trace_nfns = %d;\n" % len(served))
    return "".join(out)


def sweep_arg(p, i):
    """Declares argument i for pass 1 (NULL and zero) or 2 (invalid)."""
    if p.pointer:
        return "\t%s a%d = NULL;\n" % (p.type, i)
    if p.handle:
        return "\t%s a%d = pass == 1 ? NULL : (%s)(uintptr_t)0xdeadbeef000ull;\n" % (p.type, i, p.type)
    return "\t%s a%d;\n\tmemset(&a%d, pass == 1 ? 0 : 0xff, sizeof(a%d));\n" % (p.type, i, i, i)


def gen_sweep(protos, names):
    out = ["/* Generated from cuda.h by wire/gen-driver.py: do not edit. One caller per\n"
           " * exported driver function, for tests/tools/sweep.c. */\n",
           "#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda.h>\n#include <cudaProfiler.h>\n",
           "#include <stdint.h>\n#include <string.h>\n#include \"sweep.h\"\n\n"]
    for n in names:
        p = protos.get(n) or cuda_h.Proto(n, "void", set())
        types = ", ".join(q.type for q in p.params) or "void"
        out.append("static CUresult call_%s(void *fn, int pass)\n{\n" % n)
        for i, q in enumerate(p.params):
            out.append(sweep_arg(q, i))
        out.append("\t(void)pass;\n")
        out.append("\treturn ((CUresult (*)(%s))fn)(%s);\n}\n\n"
                   % (types, ", ".join("a%d" % i for i in range(len(p.params)))))
    out.append("const struct sweep_fn sweep_fns[] = {\n")
    for n in names:
        out.append("\t{ \"%s\", call_%s },\n" % (n, n))
    out.append("\t{ NULL, NULL }\n};\n")
    return "".join(out)


def main():
    mode, cc, include, stub = sys.argv[1:5]
    objs = sys.argv[5:]
    protos, _ = cuda_h.read_prototypes(cc, include)
    names = exported(stub, include)
    interop = cuda_h.interop_names(include)
    lost = [n for n in names if n not in protos and n not in interop]
    if lost:
        sys.exit("gen-driver.py: no prototype in cuda.h for " + ", ".join(lost))
    if mode == "sweep":
        sys.stdout.write(gen_sweep(protos, names))
        return
    have = defined(objs)
    kinds = classify(names, have, protos)
    if mode == "ptds":
        sys.stdout.write(gen_ptds(protos, kinds) + gen_old(protos, kinds, have))
    elif mode == "missing":
        sys.stdout.write(gen_missing(kinds))
    elif mode == "trace":
        sys.stdout.write(gen_trace(protos, kinds))
    elif mode == "rename":
        sys.stdout.write(gen_rename(protos, kinds))
    elif mode == "list":
        for n in names:
            print("%-48s %s" % (n, kinds[n]))
    else:
        sys.exit("gen-driver.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
