#!/usr/bin/env python3
"""test_cuda_h.py: unit tests of the driver API generator (wire/cuda_h.py,
wire/gen-driver.py): prototype parsing on a small header and on the real
cuda.h, and how exported names are classified.

usage: test_cuda_h.py [CUDA_INCLUDE] [STUB_LIBCUDA]
"""
import importlib.util
import os
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "wire"))
import cuda_h  # noqa: E402

INCLUDE = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include"
STUB = sys.argv[2] if len(sys.argv) > 2 else "/usr/local/cuda/lib64/stubs/libcuda.so"

SMALL = """
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef void (*CUhostFn)(void *userData);
CUresult cuA(CUcontext ctx, unsigned int flags);
CUresult cuB(CUdeviceptr *dptr, const void *src, size_t n, CUstream hStream);
CUresult cuC(void);
CUresult cuD(float bias, char name[16], const char **pStr);
CUresult cuE(CUstream hStream, CUhostFn fn, void *userData);
int notADriverCall(int x);
"""


def load_gen_driver():
    spec = importlib.util.spec_from_file_location("gen_driver", os.path.join(ROOT, "wire", "gen-driver.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class SmallHeader(unittest.TestCase):
    def setUp(self):
        self.protos, self.handles = cuda_h.parse(SMALL)

    def test_handles(self):
        self.assertEqual(self.handles, {"CUcontext", "CUstream"})

    def test_only_cuda_calls(self):
        self.assertEqual(sorted(self.protos), ["cuA", "cuB", "cuC", "cuD", "cuE"])

    def test_kinds(self):
        a, b = self.protos["cuA"].params, self.protos["cuB"].params
        self.assertTrue(a[0].handle and not a[0].pointer)
        self.assertFalse(a[1].handle or a[1].pointer)
        self.assertTrue(b[0].pointer and b[1].pointer and not b[2].pointer)
        self.assertEqual(self.protos["cuB"].stream_param(), 3)

    def test_void_and_arrays(self):
        self.assertEqual(self.protos["cuC"].params, [])
        d = self.protos["cuD"].params
        self.assertTrue(d[0].floating)
        self.assertEqual((d[1].type, d[1].name, d[1].pointer), ("char *", "name", True))
        self.assertEqual(d[2].decl(), "const char **pStr")

    def test_function_pointer_typedef(self):
        e = self.protos["cuE"].params
        self.assertEqual([p.name for p in e], ["hStream", "fn", "userData"])


class RealHeader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.protos, _ = cuda_h.read_prototypes(os.environ.get("CC", "cc"), INCLUDE)
        cls.gen = load_gen_driver()
        cls.names = cls.gen.exported(STUB, INCLUDE)
        cls.interop = cuda_h.interop_names(INCLUDE)

    def test_every_export_has_a_prototype(self):
        self.assertGreater(len(self.names), 600)
        self.assertEqual([n for n in self.names if n not in self.protos and n not in self.interop], [])

    def test_interop_names(self):
        for n in ("cuGLCtxCreate_v2", "cuGLMapBufferObject_v2_ptds", "cuGLMapBufferObjectAsync_v2_ptsz",
                  "cuGraphicsEGLRegisterImage", "cuVDPAUGetDevice", "cuGraphicsGLRegisterBuffer"):
            self.assertIn(n, self.interop)
        self.assertFalse([n for n in self.names if n.startswith("cudbg")])

    def test_versions_and_per_thread_forms(self):
        self.assertEqual([p.type for p in self.protos["cuMemcpyHtoD_v2"].params],
                         ["CUdeviceptr", "const void *", "size_t"])
        self.assertEqual(self.protos["cuMemcpyHtoD"].params[0].type, "CUdeviceptr_v1")
        self.assertEqual(self.protos["cuLaunchKernel_ptsz"].stream_param(), 8)

    def test_classify(self):
        kinds = self.gen.classify(["cuA", "cuA_ptsz", "cuB_ptds", "cuC"], {"cuA"})
        self.assertEqual(kinds, {"cuA": "interposer", "cuA_ptsz": "ptds", "cuB_ptds": "missing",
                                 "cuC": "missing"})


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]], exit=False, verbosity=0).result
    failed = len(result.failures) + len(result.errors)
    print("%d passed, %d failed" % (result.testsRun - failed, failed))
    sys.exit(1 if failed else 0)
