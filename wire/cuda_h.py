"""cuda_h.py: the driver API's prototypes, read from cuda.h itself.

The header is run through the C preprocessor three ways, so that every
name the driver exports gets the prototype it is exported with: as a
program sees it (cuMemAlloc is cuMemAlloc_v2), with the per-thread
default stream (the _ptds and _ptsz forms), and as the driver builds it
(__CUDA_API_VERSION_INTERNAL: the old ABIs such as cuMemAlloc with
32-bit pointers). cudaProfiler.h adds the profiler calls.

    protos, handles = read_prototypes(cc, include_dir)   # {name: Proto}
    names = interop_names(include_dir)   # graphics interop (GL, EGL, VDPAU)

The graphics interop headers need GL and EGL headers to compile, which a
build machine may lack: their names are read from the text instead (no
prototypes; Cicada serves none of them).
"""
import re
import subprocess

# Typedefs of pointers to opaque structs: the driver's handles.
_HANDLE_RE = re.compile(r"typedef\s+struct\s+\w+\s*\*\s*(\w+)\s*;")
_PROTO_RE = re.compile(r"\bCUresult\s+(cu\w+)\s*\(([^;{}]*)\)\s*;")


class Param:
    """One parameter: its C type, its name, and what kind of value it is."""

    def __init__(self, text, handles):
        text = " ".join(text.split())
        m = re.match(r"^(.*?)(\w+)\s*(\[\s*\w*\s*\])?$", text)
        if not m or not m.group(1).strip():
            # An unnamed parameter ("void", or a bare type).
            self.type, self.name = text, ""
        else:
            self.type, self.name = m.group(1).strip(), m.group(2)
            if m.group(3):
                self.type += " *"
        self.type = re.sub(r"\s*\*\s*", "*", self.type).strip()
        self.type = re.sub(r"(?<=\w)\*", " *", self.type, count=1)
        base = self.type.replace("const ", "").replace("*", "").strip()
        self.pointer = "*" in self.type
        self.handle = not self.pointer and base in handles
        self.floating = not self.pointer and base in ("float", "double")

    def decl(self):
        if not self.name:
            return self.type
        return self.type + self.name if self.type.endswith("*") else "%s %s" % (self.type, self.name)


class Proto:
    """A driver function: its name and parameters."""

    def __init__(self, name, params, handles):
        self.name = name
        params = params.strip()
        self.params = [] if params in ("", "void") else \
            [Param(p, handles) for p in _split_params(params)]
        self.text = params or "void"

    def stream_param(self):
        """The index of the CUstream parameter, or -1."""
        for i, p in enumerate(self.params):
            if p.type == "CUstream":
                return i
        return -1


def _split_params(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out if p.strip()]


def parse(text):
    """Prototypes and handle types of preprocessed header text."""
    text = text.replace("\n", " ")
    handles = set(_HANDLE_RE.findall(text))
    protos = {}
    for m in _PROTO_RE.finditer(text):
        name, params = m.group(1), m.group(2)
        protos.setdefault(name, Proto(name, params, handles))
    return protos, handles


def _preprocess(cc, include, header, defines):
    cmd = [cc, "-E", "-P", "-I" + include] + ["-D" + d for d in defines] + ["%s/%s" % (include, header)]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def read_prototypes(cc, include):
    """Every prototype cuda.h and cudaProfiler.h give, by exported name."""
    protos, handles = {}, set()
    for header, defines in (("cuda.h", []), ("cuda.h", ["CUDA_API_PER_THREAD_DEFAULT_STREAM"]),
                            ("cuda.h", ["__CUDA_API_VERSION_INTERNAL"]), ("cudaProfiler.h", [])):
        p, h = parse(_preprocess(cc, include, header, defines))
        handles |= h
        for name, proto in p.items():
            protos.setdefault(name, proto)
    return protos, handles


INTEROP_HEADERS = ("cudaGL.h", "cudaEGL.h", "cudaVDPAU.h")


def interop_names(include):
    """The driver names the graphics interop headers declare, as exported:
    their _v2 and per-thread-stream forms included."""
    names = set()
    for header in INTEROP_HEADERS:
        try:
            text = open("%s/%s" % (include, header)).read()
        except OSError:
            continue
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        names |= set(re.findall(r"\bCUresult\s+CUDAAPI\s+(cu\w+)\s*\(", text))
        for target in re.findall(r"#define\s+cu\w+\s+(cu\w+_v\d+)\b", text):
            names.add(target)
        for kind, target in re.findall(r"#define\s+cu\w+\s+__CUDA_API_(PTDS|PTSZ)\((cu\w+)\)", text):
            names |= {target, target + "_" + kind.lower()}
    return names
