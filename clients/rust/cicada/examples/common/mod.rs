//! What the examples share: the kernels' bytes, from
//! build/rust/kernels beside the example's binary, or CICADA_RUST_KERNELS.

/// rust_kernels.EXT (ptx, cubin or fatbin).
pub fn kernels(ext: &str) -> Vec<u8> {
    let dir = std::env::var("CICADA_RUST_KERNELS").unwrap_or_else(|_| {
        let exe = std::env::current_exe().unwrap();
        format!("{}/../kernels", exe.parent().unwrap().display())
    });
    let path = format!("{}/rust_kernels.{}", dir, ext);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {}", path, e))
}
