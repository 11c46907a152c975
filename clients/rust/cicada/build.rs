// build.rs: generates the protocol's Rust code (src/proto.rs includes it)
// from the one table, as the C build does: wire/gen-calls.py's rust mode
// over wire/calls.tbl, wire/cicada.x and cuda.h (CUDA, default
// /usr/local/cuda; CC, default cc, sizes its types).
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../../..").canonicalize().expect("the Cicada tree around the crate");
    let wire = root.join("wire");
    let cuda = env::var("CUDA").unwrap_or_else(|_| "/usr/local/cuda".into());
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("proto.rs");
    for f in ["calls.tbl", "cicada.x", "gen-calls.py", "rust_gen.py", "cuda_h.py"] {
        println!("cargo:rerun-if-changed={}", wire.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CUDA");
    println!("cargo:rerun-if-env-changed=CC");
    let r = Command::new("python3")
        .arg(wire.join("gen-calls.py"))
        .args(["--cc", &cc, "--include", &format!("{}/include", cuda), "rust"])
        .arg(wire.join("calls.tbl"))
        .arg(wire.join("cicada.x"))
        .output()
        .expect("python3 runs wire/gen-calls.py");
    if !r.status.success() {
        panic!("wire/gen-calls.py rust failed:\n{}", String::from_utf8_lossy(&r.stderr));
    }
    std::fs::write(&out, &r.stdout).expect("OUT_DIR is writable");
}
