"""rust_gen.py: the Rust backend of gen-calls.py ("gen-calls.py rust").

From the same two sources as the C code, cicada.x (the message types)
and calls.tbl (the procedures), it writes one Rust module for the Rust
client (clients/rust/cicada, whose build.rs runs it):

  - every constant and enum of cicada.x, as Rust constants;
  - every struct, as a Rust struct with its XDR encoder and decoder
    (crate::xdr: the decoder bounds every length by the .x's maximum);
  - every procedure's number (P_<name>, as in C) and name;
  - a trait, Calls, with one typed stub per procedure: a hand call takes
    its argument struct and returns its result struct; a generated call
    takes its inputs as Rust integers (handles as their u64 ids, a struct
    sent as bytes as its 64-bit words, a launch configuration as its 7
    words) and returns its outputs;
  - the CUresult names and values of cuda.h.

The sizes of C types (how many words a struct sent as bytes takes, how
wide a scalar is) are the C compiler's to say: they are asked of it.
"""
import os
import re
import subprocess
import tempfile

KEYWORDS = {"as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
            "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
            "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
            "where", "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv",
            "typeof", "unsized", "virtual", "yield", "try"}

SIGNED = {"int": "i32", "CUdevice": "i32", "long long": "i64", "short": "i16", "char": "i8", "long": "i64"}
UNSIGNED = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


def ident(name):
    return "r#" + name if name in KEYWORDS else name


def camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


# --- cicada.x ----------------------------------------------------------

_TOKEN_RE = re.compile(r"0x[0-9a-fA-F]+|\w+|[{}\[\]<>;=,()*]")


def _tokens(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"%[^\n]*", " ", text)
    return _TOKEN_RE.findall(text)


class Field:
    """One member: its XDR base type, and whether a variable (<max>) or
    fixed ([n]) array of it, or a scalar."""

    def __init__(self, base, name, kind, size):
        self.base, self.name, self.kind, self.size = base, name, kind, size


def parse_x(text):
    """(consts, enums, structs) of an XDR file, in order: consts as
    [(name, value)], enums as [(name, [(member, value)])], structs as
    [(name, [Field])]."""
    toks, i = _tokens(text), 0
    consts, enums, structs, values = [], [], [], {}

    def num(t):
        return int(t, 0) if re.match(r"^-?(0x[0-9a-fA-F]+|\d+)$", t) else values[t]

    while i < len(toks):
        t = toks[i]
        if t == "const":
            name, value = toks[i + 1], num(toks[i + 3])
            consts.append((name, value))
            values[name] = value
            i += 5
        elif t == "enum":
            name, members = toks[i + 1], []
            i += 3
            while toks[i] != "}":
                m, v = toks[i], num(toks[i + 2])
                members.append((m, v))
                values[m] = v
                i += 4 if toks[i + 3] == "," else 3
            enums.append((name, members))
            i += 2
        elif t == "struct":
            name, fields = toks[i + 1], []
            i += 3
            while toks[i] != "}":
                j = i
                while toks[j] != ";":
                    j += 1
                fields.append(_field(toks[i:j], num))
                i = j + 1
            structs.append((name, fields))
            i += 2
        elif t == "program":
            break
        else:
            raise SystemExit("rust_gen: cannot parse cicada.x near %r" % " ".join(toks[i:i + 6]))
    return consts, enums, structs


def _field(toks, num):
    if toks[0] == "unsigned" and toks[1] in ("int", "hyper"):
        base, rest = "unsigned " + toks[1], toks[2:]
    elif toks[0] == "unsigned":
        base, rest = "unsigned int", toks[1:]
    else:
        base, rest = toks[0], toks[1:]
    name = rest[0]
    if len(rest) == 1:
        return Field(base, name, "one", None)
    if rest[1] == "<":
        return Field(base, name, "var", num(rest[2]) if rest[2] != ">" else 0xFFFFFFFF)
    return Field(base, name, "fixed", num(rest[2]))


PRIM = {"unsigned int": ("u32", "u32"), "int": ("i32", "i32"), "unsigned hyper": ("u64", "u64"),
        "hyper": ("i64", "i64"), "float": ("f32", "f32"), "double": ("f64", "f64"), "bool": ("bool", "bool")}


def rust_field_type(f, enums):
    if f.base == "opaque":
        return "Vec<u8>"
    if f.base == "string":
        return "String"
    elem = PRIM[f.base][0] if f.base in PRIM else "i32" if f.base in enums else camel(f.base)
    if f.kind == "one":
        return elem
    return "Vec<%s>" % elem


def gen_types(consts, enums, structs):
    enum_names = {n for n, _ in enums}
    out = ["// The constants of cicada.x.\n"]
    for name, value in consts:
        out.append("pub const %s: u32 = %d;\n" % (name, value))
    out.append("\n// Its enums (XDR enums are ints).\n")
    for name, members in enums:
        out.append("pub type %s = i32;\n" % camel(name))
        for m, v in members:
            out.append("pub const %s: i32 = %d;\n" % (m, v))
    out.append("\n")
    for name, fields in structs:
        rname = camel(name)
        out.append("/// cicada.x: struct %s.\n#[derive(Debug, Clone, Default, PartialEq)]\npub struct %s {\n"
                   % (name, rname))
        for f in fields:
            out.append("    pub %s: %s,\n" % (ident(f.name), rust_field_type(f, enum_names)))
        out.append("}\n\nimpl Xdr for %s {\n    fn put(&self, w: &mut Writer) -> Result<(), XdrError> {\n"
                   % rname)
        for f in fields:
            out.append("        %s\n" % put_field(f, enum_names))
        out.append("        Ok(())\n    }\n\n    fn get(r: &mut Reader) -> Result<Self, XdrError> {\n")
        out.append("        Ok(%s {\n" % rname)
        for f in fields:
            out.append("            %s: %s,\n" % (ident(f.name), get_field(f, enum_names)))
        out.append("        })\n    }\n}\n\n")
        if fields and fields[0].name == "err" and fields[0].base == "int":
            out.append("impl HasErr for %s {\n    fn err(&self) -> i32 {\n        self.err\n    }\n}\n\n" % rname)
    return "".join(out)


def put_field(f, enums):
    v = "self.%s" % ident(f.name)
    if f.base == "opaque":
        return ("w.opaque_fixed(&%s, %d)?;" if f.kind == "fixed" else "w.opaque(&%s, %d)?;") % (v, f.size)
    if f.base == "string":
        return "w.string(&%s, %d)?;" % (v, f.size)
    if f.kind == "one":
        return "%s.put(w)?;" % v
    if f.kind == "fixed":
        return "w.array_fixed(&%s, %d)?;" % (v, f.size)
    return "w.array(&%s, %d)?;" % (v, f.size)


def get_field(f, enums):
    if f.base == "opaque":
        return ("r.opaque_fixed(%d)?" if f.kind == "fixed" else "r.opaque(%d)?") % f.size
    if f.base == "string":
        return "r.string(%d)?" % f.size
    if f.kind == "one":
        return "Xdr::get(r)?"
    return ("r.array_fixed(%d)?" if f.kind == "fixed" else "r.array(%d)?") % f.size


# --- calls.tbl ---------------------------------------------------------

def c_sizes(cc, include, types):
    """sizeof of each C type named (cuda.h's), as the compiler says."""
    if not types:
        return {}
    types = sorted(types)
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "sizes.c"), os.path.join(d, "sizes")
        with open(src, "w") as f:
            f.write("#include <cuda.h>\n#include <stdio.h>\nint main(void)\n{\n")
            for t in types:
                f.write('\tprintf("%%zu\\n", sizeof(%s));\n' % t)
            f.write("\treturn 0;\n}\n")
        subprocess.run([cc, "-I" + include, "-o", exe, src], check=True)
        got = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()
    return dict(zip(types, (int(n) for n in got)))


def scalar_type(p, sizes):
    """The Rust type of a generated call's scalar parameter."""
    if p.handle:
        return "u64"
    t = p.type.replace("const ", "").strip()
    if t == "float":
        return "f32"
    if t in SIGNED:
        return SIGNED[t]
    return UNSIGNED[sizes[t]]


def words_of(p, sizes):
    if p.config:
        return 7
    return (sizes[p.type.replace("const ", "").strip()] + 7) // 8


def to_word(p, name, rtype):
    if rtype == "f32":
        return "%s.to_bits() as u64" % name
    if rtype.startswith("i"):
        return "%s as i64 as u64" % name
    return "%s as u64" % name


def from_word(expr, rtype):
    if rtype == "f32":
        return "f32::from_bits(%s as u32)" % expr
    return "%s as %s" % (expr, rtype)


def gen_calls(calls, sizes):
    out = ["/// The procedures' numbers (as the C code names them).\n"]
    for c in calls:
        out.append("pub const P_%s: u32 = %d;\n" % (c.name, c.proc))
    out.append("\n/// A procedure's name, for messages.\npub fn proc_name(proc_: u32) -> &'static str {\n"
               "    match proc_ {\n")
    for c in calls:
        out.append("        %d => \"%s\",\n" % (c.proc, c.name))
    out.append("        _ => \"unknown procedure\",\n    }\n}\n\n")
    out.append("/// One typed stub per procedure of calls.tbl, over any Caller.\n"
               "#[allow(non_snake_case, clippy::too_many_arguments)]\npub trait Calls: Caller {\n")
    for c in calls:
        out.append(stub(c, sizes))
    out.append("}\n\nimpl<T: Caller + ?Sized> Calls for T {}\n")
    return "".join(out)


def stub(c, sizes):
    if c.hand:
        doc = "    /// %d %s (hand): %s -> %s\n" % (c.proc, c.name, c.args, c.res)
        if c.res == "void":
            return doc + ("    fn %s(&mut self, args: &%s) -> Result<(), Error> {\n"
                          "        self.send(P_%s, args)\n    }\n\n" % (ident(c.name), camel(c.args), c.name))
        return doc + ("    fn %s(&mut self, args: &%s) -> Result<%s, Error> {\n"
                      "        self.call(P_%s, args)\n    }\n\n"
                      % (ident(c.name), camel(c.args), camel(c.res), c.name))
    params, body = [], []
    nin = 0
    for p in c.ins:
        name = ident(p.name)
        if p.bytes or p.config:
            n = words_of(p, sizes)
            params.append("%s: &[u64; %d]" % (name, n))
            body.append("        ins.extend_from_slice(%s);\n" % name)
            nin += n
        else:
            rt = scalar_type(p, sizes)
            params.append("%s: %s" % (name, rt))
            body.append("        ins.push(%s);\n" % to_word(p, name, rt))
            nin += 1
    outs, rets, nout = [], [], 0
    for p in c.outs:
        if p.bytes:
            n = words_of(p, sizes)
            outs.append("[u64; %d]" % n)
            rets.append("{ let mut a = [0u64; %d]; a.copy_from_slice(&out[%d..%d]); a }" % (n, nout, nout + n))
            nout += n
        else:
            rt = scalar_type(p, sizes)
            outs.append(rt)
            rets.append(from_word("out[%d]" % nout, rt))
            nout += 1
    ret = "()" if not outs else outs[0] if len(outs) == 1 else "(%s)" % ", ".join(outs)
    doc = "    /// %d %s (%s): %s\n" % (c.proc, c.name, "async" if c.async_ else "sync", c.sig.strip())
    s = [doc, "    fn %s(&mut self%s) -> Result<%s, Error> {\n" % (ident(c.name), "".join(", " + p for p in params), ret)]
    s.append("        let %sins: Vec<u64> = Vec::with_capacity(%d);\n" % ("mut " if nin else "", nin))
    s.extend(body)
    if c.async_:
        s.append("        self.send(P_%s, &Scalars { v: ins })\n    }\n\n" % c.name)
        return "".join(s)
    s.append("        let %sout = self.scalar_call(P_%s, ins, %d)?;\n" % ("" if outs else "_", c.name, nout))
    if not outs:
        s.append("        Ok(())\n    }\n\n")
    elif len(rets) == 1:
        s.append("        Ok(%s)\n    }\n\n" % rets[0])
    else:
        s.append("        Ok((%s))\n    }\n\n" % ", ".join(rets))
    return "".join(s)


def gen_errors(include):
    """CUresult's names and values, from cuda.h (as interposer/gen-errors.sh)."""
    text = open(os.path.join(include, "cuda.h")).read()
    m = re.search(r"typedef enum cudaError_enum \{(.*?)\} CUresult;", text, re.S)
    seen, pairs = set(), []
    for name, value in re.findall(r"^\s*(CUDA_[A-Z0-9_]+)\s*=\s*(\d+)", m.group(1), re.M):
        pairs.append((name, int(value)))
    out = ["/// CUresult values (cuda.h).\n"]
    for name, value in pairs:
        out.append("pub const %s: i32 = %d;\n" % (name, value))
    out.append("\n/// A CUresult's name (cuda.h), if it has one.\npub fn error_name(err: i32) -> Option<&'static str> {\n"
               "    match err {\n")
    for name, value in sorted(pairs, key=lambda p: p[1]):
        if value in seen:
            continue
        seen.add(value)
        out.append("        %d => Some(\"%s\"),\n" % (value, name))
    out.append("        _ => None,\n    }\n}\n")
    # the driver API's other named values (attributes, JIT options, flags)
    out.append("\n/// cuda.h's enum members with a plain value (CU_*), by name.\npub mod cu {\n")
    names = set()
    for name, value in re.findall(r"^\s*(CU_[A-Za-z0-9_]+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*,?\s*(?:/|$)", text, re.M):
        if name not in names:
            names.add(name)
            out.append("    pub const %s: i64 = %s;\n" % (name, value))
    out.append("}\n")
    return "".join(out)


def generate(calls, xfile, cc, include):
    consts, enums, structs = parse_x(open(xfile).read())
    wanted = set()
    for c in calls:
        for p in c.params:
            if not p.handle and not p.config:
                wanted.add(p.type.replace("const ", "").strip())
    sizes = c_sizes(cc, include, wanted)
    head = ("// Generated from wire/cicada.x, wire/calls.tbl and cuda.h by wire/gen-calls.py rust: do not edit.\n"
            "use crate::xdr::{Caller, HasErr, Reader, Writer, Xdr, XdrError};\nuse crate::Error;\n\n")
    return head + gen_types(consts, enums, structs) + gen_calls(calls, sizes) + "\n" + gen_errors(include)
