#!/usr/bin/env python3
"""gen-calls.py: turns calls.tbl into the code the build generates.

  gen-calls.py x      TABLE CICADA_X   -> cicada.x with the program block
  gen-calls.py client TABLE            -> interposer stubs (C)
  gen-calls.py server TABLE            -> server handlers and dispatch table (C)
  gen-calls.py server-h TABLE          -> the prototypes of the server's wrap_ and hand_ calls
  gen-calls.py rust   TABLE CICADA_X   -> the Rust client's types and stubs (rust_gen.py)

Only calls whose parameters are all scalars, handles, a launch
configuration ("const CUlaunchConfig *", sent as CONFIG_WIDTH scalars) or
plain structs sent as their bytes are generated in full; 'hand' calls get
their procedure number, XDR types, a dispatch entry, the server's
prototype and client stubs typed by the table (rpc_NAME(args, res) and
rpc_NAME_locked), and their C bodies are written by hand where the
semantics live.

A generated call's signature may be '@', then the prototype is cuda.h's
(wire/cuda_h.py; gen-calls.py then needs --cc CC --include DIR before the
mode). After '@', NAME:bytes says that pointer parameter NAME is a plain
struct (no handles, no host pointers) that travels as its bytes: an input
if it is const, else an output.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_h  # noqa: E402

HANDLES = {
    "CUcontext": "H_CTX", "CUmodule": "H_MODULE", "CUfunction": "H_FUNCTION",
    "CUlibrary": "H_LIBRARY", "CUkernel": "H_KERNEL", "CUstream": "H_STREAM",
    "CUevent": "H_EVENT", "CUgraph": "H_GRAPH", "CUgraphExec": "H_GRAPH_EXEC", "CUgraphNode": "H_GRAPH_NODE",
    "CUarray": "H_ARRAY", "CUlinkState": "H_LINK",
}


# A launch configuration travels as 7 scalars: the stream, grid and block
# sizes, shared memory, and the cluster attributes (the only ones sent),
# packed by launch_config_pack (interposer/launch.c) and unpacked by
# launch_config_unpack (gpu-server/calls/module.c).
CONFIG_TYPE = "const CUlaunchConfig"
CONFIG_WIDTH = 7

def words(ctype):
    """The number of 64-bit scalars a struct's bytes take, as C."""
    return "((sizeof(%s) + 7) / 8)" % ctype


class Param:
    def __init__(self, text, as_bytes=False):
        text = text.strip()
        self.release = text.endswith("~")
        text = text.rstrip("~").strip()
        m = re.match(r"^(.*?)(\**)\s*(\w+)$", text.replace(" *", "* ").replace("* ", " *"))
        base, stars, name = m.group(1).strip(), m.group(2), m.group(3)
        if "*" in base:
            stars += "*" * base.count("*")
            base = base.replace("*", "").strip()
        self.config = base == CONFIG_TYPE and len(stars) == 1
        self.bytes = as_bytes and len(stars) == 1
        self.const = base.startswith("const ")
        self.type, self.name = base, name
        self.out = len(stars) == 1 and not self.config and not (self.bytes and self.const)
        self.handle = HANDLES.get(self.type)
        self.width = str(CONFIG_WIDTH) if self.config else \
            words(self.type.replace("const ", "")) if self.bytes else "1"


def from_header(name, rest, protos):
    """A signature from cuda.h's prototype, and the parameters marked bytes."""
    if protos is None:
        sys.exit("gen-calls.py: %s takes its prototype from cuda.h: give --cc and --include" % name)
    if name not in protos:
        sys.exit("gen-calls.py: cuda.h has no prototype for %s" % name)
    marks = dict(m.split(":", 1) for m in rest.split())
    sig = ", ".join(q.decl() for q in protos[name].params)
    return sig, {n for n, m in marks.items() if m == "bytes"}


class Call:
    def __init__(self, line, protos=None):
        parts = line.split(None, 3)
        self.proc, self.name, flags = int(parts[0]), parts[1], parts[2].split("+")
        self.sig = parts[3] if len(parts) > 3 else ""
        as_bytes = set()
        if self.sig.startswith("@"):
            self.sig, as_bytes = from_header(self.name, self.sig[1:], protos)
        self.kind = flags[0]
        self.local = "local" in flags
        self.syncpoint = "syncpoint" in flags
        self.hand = "hand" in flags
        self.wrap = "wrap" in flags
        self.record = "record" in flags
        self.code = "cache-code" in flags
        self.cache = "cache" in flags or self.code
        self.flush = "flush" in flags
        self.flush_code = "flush-code" in flags
        if self.hand:
            self.args, self.res = [s.strip() for s in self.sig.split("->")]
            self.async_ = self.res == "void"
            self.params = []
        else:
            self.async_ = self.kind == "async"
            self.args = "scalars"
            self.res = "void" if self.async_ else "scalar_res"
            self.params = [Param(p, p.split()[-1].lstrip("*") in as_bytes)
                           for p in self.sig.split(",") if p.strip()]
        self.ins = [p for p in self.params if not p.out]
        self.outs = [p for p in self.params if p.out]
        self.creates = "creates" in flags or any(p.handle for p in self.outs)
        # Where each input and output starts among the scalars: C
        # expressions, since a struct's size is the compiler's to say.
        self.offsets, self.out_offsets = [], []
        nin, nout = "0", "0"
        for p in self.ins:
            self.offsets.append(nin)
            nin = simplify("%s + %s" % (nin, p.width))
        for p in self.outs:
            self.out_offsets.append(nout)
            nout = simplify("%s + %s" % (nout, p.width if p.bytes else "1"))
        self.nin, self.nout = nin, nout
        hin = [self.offsets[i] for i, p in enumerate(self.ins) if p.handle]
        self.parent_arg = hin[0] if hin else "-1"
        self.has_config = any(p.config for p in self.ins)

    @property
    def proc_macro(self):
        return "P_" + self.name


def simplify(expr):
    """Folds the whole numbers of a sum: "0 + 1 + 1 + x" -> "2 + x"."""
    n, rest = 0, []
    for t in expr.split(" + "):
        if t.isdigit():
            n += int(t)
        else:
            rest.append(t)
    return " + ".join(([str(n)] if n or not rest else []) + rest)


def read_table(path, protos=None):
    calls = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            calls.append(Call(line, protos))
    procs = [c.proc for c in calls]
    assert len(procs) == len(set(procs)), "duplicate procedure number"
    return calls


def gen_x(calls, xfile):
    out = [open(xfile).read(), "\nprogram CICADA_PROGRAM {\n\tversion CICADA_VERSION {\n"]
    for c in calls:
        out.append("\t\t%s %s(%s) = %d;\n" % (c.res, c.proc_macro, c.args, c.proc))
    out.append("\t} = 1;\n} = 0x20c1cada;\n")
    return "".join(out)


def to_u64(p):
    if p.handle:
        return "(uint64_t)(uintptr_t)%s" % p.name
    return "(uint64_t)%s" % p.name


def from_u64(t, expr, handle):
    if handle:
        return "(%s)(uintptr_t)%s" % (t, expr)
    if t == "float":
        return "u64_to_float(%s)" % expr
    return "(%s)%s" % (t, expr)


def proto(c):
    ps = []
    for p in c.params:
        ps.append("%s %s%s" % (p.type, "*" if p.out or p.config or p.bytes else "", p.name))
    return ", ".join(ps) or "void"


def hand_protos(c):
    """A hand call's client stubs, typed by the table: rpc_NAME, and
    rpc_NAME_locked for a caller that holds the client lock."""
    params = "%s *args" % c.args + ("" if c.res == "void" else ", %s *res" % c.res)
    return ["CUresult rpc_%s(%s)" % (c.name, params), "CUresult rpc_%s_locked(%s)" % (c.name, params)]


def hand_stubs(c):
    res = "NULL, NULL" if c.res == "void" else "(xdrproc_t)xdr_%s, res" % c.res
    out = []
    for proto_, call in zip(hand_protos(c), ["client_call", "client_call_locked"]):
        out.append("%s\n{\n\treturn %s(%s, (xdrproc_t)xdr_%s, args, %s);\n}\n\n"
                   % (proto_, call, c.proc_macro, c.args, res))
    return "".join(out)


def gen_client(calls):
    out = ["/* Generated from wire/calls.tbl by wire/gen-calls.py: do not edit. */\n",
           '#include "interposer.h"\n\n']
    for c in calls:
        if c.hand:
            out.append(hand_stubs(c))
            continue
        out.append("CUresult rpc_%s(%s)\n{\n" % (c.name, proto(c)))
        out.append("\tuint64_t in[CICADA_SCALARS_MAX] = { 0 }, out[CICADA_SCALARS_MAX];\n")
        out.append("\tCUresult err;\n\n")
        out.append("\t_Static_assert(%s <= CICADA_SCALARS_MAX && %s <= CICADA_SCALARS_MAX, \"%s\");\n"
                   % (c.nin, c.nout, c.name))
        for p in c.outs + [q for q in c.ins if q.bytes]:
            out.append("\tif (!%s)\n\t\treturn CUDA_ERROR_INVALID_VALUE;\n" % p.name)
        for off, p in zip(c.offsets, c.ins):
            if p.config:
                out.append("\tif ((err = launch_config_pack(%s, &in[%s])) != CUDA_SUCCESS)\n\t\treturn err;\n"
                           % (p.name, off))
            elif p.bytes:
                out.append("\tmemcpy(&in[%s], %s, sizeof(*%s));\n" % (off, p.name, p.name))
            else:
                out.append("\tin[%s] = %s;\n" % (off, to_u64(p)))
        if c.cache:
            out.append("\terr = client_cached%s_call(%s, in, %s, out, %s);\n"
                       % ("_code" if c.code else "", c.proc_macro, c.nin, c.nout))
        else:
            out.append("\terr = client_scalar_call(%s, %d, in, %s, out, %s);\n"
                       % (c.proc_macro, int(c.async_), c.nin, c.nout))
        if c.flush:
            out.append("\tanswers_flush();\n")
        if c.flush_code:
            out.append("\tanswers_flush_code();\n")
        if c.outs:
            out.append("\tif (err != CUDA_SUCCESS)\n\t\treturn err;\n")
            for i, p in zip(c.out_offsets, c.outs):
                rhs = "out[%s]" % i
                if p.bytes:
                    out.append("\tmemcpy(%s, &%s, sizeof(*%s));\n" % (p.name, rhs, p.name))
                elif p.type == "float":
                    out.append("\t*%s = u64_to_float(%s);\n" % (p.name, rhs))
                else:
                    out.append("\t*%s = %s;\n" % (p.name, from_u64(p.type, rhs, p.handle)))
        out.append("\treturn err;\n}\n\n")
        if not c.local:
            args = ", ".join(p.name for p in c.params)
            # cuda.h may map the name to another ABI's (cuEventElapsedTime
            # to cuEventElapsedTime_v2): the table names the symbol itself.
            out.append("#undef %s\nCUresult CUDAAPI %s(%s)\n{\n\treturn rpc_%s(%s);\n}\n\n"
                       % (c.name, c.name, proto(c), c.name, args))
    out.append("/* Each procedure's name, for the log. */\nconst char *rpc_name(unsigned proc)\n{\n"
               "\tswitch (proc) {\n")
    for c in calls:
        out.append("\tcase %s: return \"%s\";\n" % (c.proc_macro, c.name))
    out.append("\tdefault: return \"unknown procedure\";\n\t}\n}\n")
    return "".join(out)


def gen_client_header(calls):
    out = ["/* Generated from wire/calls.tbl by wire/gen-calls.py: do not edit. */\n",
           "const char *rpc_name(unsigned proc);\n"]
    for c in calls:
        if not c.hand:
            out.append("CUresult rpc_%s(%s);\n" % (c.name, proto(c)))
        else:
            out.extend(p + ";\n" for p in hand_protos(c))
    return "".join(out)


def gen_server_header(calls):
    out = ["/* Generated from wire/calls.tbl by wire/gen-calls.py: do not edit. The\n"
           " * worker's wrap_ functions, which the generated handlers call, and its\n"
           " * hand_ functions, which the dispatch table names. */\n"]
    for c in calls:
        if c.wrap and not c.hand:
            out.append("CUresult wrap_%s(struct worker *w%s);\n"
                       % (c.name, ", " + proto(c) if c.params else ""))
    for c in calls:
        if c.hand:
            out.append("CUresult hand_%s(struct worker *w, void *args, void *res);\n" % c.name)
    return "".join(out)


def gen_server(calls):
    out = ["/* Generated from wire/calls.tbl by wire/gen-calls.py: do not edit. */\n",
           '#include "gpu-server.h"\n\n']
    for c in calls:
        if c.hand:
            continue
        out.append("#undef %s\nstatic CUresult h_%s(struct worker *w, const uint64_t *in, uint64_t *out)\n{\n"
                   % (c.name, c.name))
        for p in c.params:
            if p.config:
                out.append("\tCUlaunchConfig %s;\n\tCUlaunchAttribute %s_attrs[2];\n" % (p.name, p.name))
            else:
                out.append("\t%s %s;\n" % (p.type.replace("const ", "") if p.bytes else p.type, p.name))
        out.append("\tCUresult err = CUDA_SUCCESS;\n\n")
        for i, p in zip(c.offsets, c.ins):
            if p.config:
                out.append("\terr = launch_config_unpack(w, &in[%s], &%s, %s_attrs);\n"
                           "\tif (err != CUDA_SUCCESS)\n\t\treturn err;\n" % (i, p.name, p.name))
            elif p.bytes:
                out.append("\tmemcpy(&%s, &in[%s], sizeof(%s));\n" % (p.name, i, p.name))
            elif p.handle:
                out.append("\terr = handle_get(w, %s, in[%s], (void **)&%s);\n"
                           "\tif (err != CUDA_SUCCESS)\n\t\treturn err;\n" % (p.handle, i, p.name))
            elif p.type == "CUdevice":
                # the client's ordinal of one of the GPUs it sees (gpus.c)
                out.append("\terr = device_in(w, in[%s], &%s);\n"
                           "\tif (err != CUDA_SUCCESS)\n\t\treturn err;\n" % (i, p.name))
            else:
                out.append("\t%s = %s;\n" % (p.name, from_u64(p.type, "in[%s]" % i, False)))
        args = ", ".join(("&" if p.out or p.config or p.bytes else "") + p.name for p in c.params)
        if c.wrap:
            out.append("\terr = wrap_%s(w%s);\n" % (c.name, ", " + args if args else ""))
        else:
            out.append("\terr = %s(%s);\n" % (c.name, args))
        out.append("\tif (err != CUDA_SUCCESS)\n\t\treturn err;\n")
        for i, p in zip(c.out_offsets, c.outs):
            if p.bytes:
                out.append("\tmemcpy(&out[%s], &%s, sizeof(%s));\n" % (i, p.name, p.name))
            elif p.handle:
                out.append("\tout[%s] = handle_put(w, %s, %s);\n" % (i, p.handle, p.name))
                out.append("\tif (!out[%s])\n\t\treturn CUDA_ERROR_OUT_OF_MEMORY;\n" % i)
            elif p.type == "float":
                out.append("\tout[%s] = float_to_u64(%s);\n" % (i, p.name))
            elif p.type == "CUdevice":
                out.append("\tout[%s] = device_out(w, %s);\n" % (i, p.name))
            else:
                out.append("\tout[%s] = (uint64_t)%s;\n" % (i, p.name))
        for i, p in zip(c.offsets, c.ins):
            if p.release:
                out.append("\thandle_drop(w, %s, in[%s]);\n" % (p.handle, i))
        out.append("\treturn CUDA_SUCCESS;\n}\n\n")
    out.append("const struct proc_desc server_procs[] = {\n")
    for c in calls:
        flags = []
        if c.async_:
            flags.append("PROC_ASYNC")
        if c.syncpoint:
            flags.append("PROC_SYNCPOINT")
        if c.record:
            flags.append("PROC_RECORD")
        if c.creates:
            flags.append("PROC_CREATES")
        flags = " | ".join(flags) or "0"
        if c.hand:
            xres = "NULL" if c.async_ else "(xdrproc_t)xdr_%s" % c.res
            rsize = "0" if c.async_ else "sizeof(%s)" % c.res
            out.append('\t{ %s, "%s", (xdrproc_t)xdr_%s, sizeof(%s), %s, %s, hand_%s, NULL, 0, 0, %s, -1 },\n'
                       % (c.proc_macro, c.name, c.args, c.args, xres, rsize, c.name, flags))
        else:
            xres = "NULL" if c.async_ else "(xdrproc_t)xdr_scalar_res"
            rsize = "0" if c.async_ else "sizeof(scalar_res)"
            out.append('\t{ %s, "%s", (xdrproc_t)xdr_scalars, sizeof(scalars), %s, %s, NULL, h_%s, %s, %s, %s, %s },\n'
                       % (c.proc_macro, c.name, xres, rsize, c.name, c.nin, c.nout, flags, c.parent_arg))
    out.append("\t{ 0 }\n};\n")
    return "".join(out)


def main():
    args, protos, cc, include = sys.argv[1:], None, None, None
    if args[:1] == ["--cc"]:
        cc, include = args[1], args[3]
        protos, _ = cuda_h.read_prototypes(cc, include)
        args = args[4:]
    mode, table = args[0], args[1]
    calls = read_table(table, protos)
    if mode == "x":
        sys.stdout.write(gen_x(calls, args[2]))
    elif mode == "client":
        sys.stdout.write(gen_client(calls))
    elif mode == "client-h":
        sys.stdout.write(gen_client_header(calls))
    elif mode == "server":
        sys.stdout.write(gen_server(calls))
    elif mode == "server-h":
        sys.stdout.write(gen_server_header(calls))
    elif mode == "rust":
        if not cc:
            sys.exit("gen-calls.py: rust needs --cc and --include (C type sizes, CUresult names)")
        import rust_gen
        sys.stdout.write(rust_gen.generate(calls, args[2], cc, include))
    else:
        sys.exit("gen-calls.py: unknown mode " + mode)


main()
