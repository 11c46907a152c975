//! matmul: C = A * B for n x n floats on a remote GPU, with no cuBLAS: a
//! tiled kernel of build/rust/kernels (as PTX, cubin or fatbin).
//!
//!   matmul [N [ptx|cubin|fatbin [REPEATS]]]
//!
//! The inputs are multiples of 1/8 small enough that every sum is exact in
//! float, whatever the order: the result must equal the CPU's bit for bit.
//! It prints a hash of the result's bits and the kernel's time (events),
//! the same line the native C program of clients/rust/gpu-check prints.
use cicada::{Context, Device, DeviceBuffer, Event, LaunchConfig, Module, Session};

mod common;
use common::kernels;

/// FNV-1a over the result's bits: equal only if every element is.
fn hash(v: &[f32]) -> u64 {
    v.iter().flat_map(|x| x.to_bits().to_le_bytes()).fold(0xcbf29ce484222325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

fn run(n: usize, format: &str, repeats: u32) -> cicada::Result<bool> {
    let s = Session::from_env()?;
    let ctx = Context::new(&Device::get(&s, 0)?)?;
    let f = Module::from_bytes(&ctx, &kernels(format))?.function("matmul_f32")?;
    let a: Vec<f32> = (0..n * n).map(|k| ((k / n * 3 + k % n * 5) % 17) as f32 * 0.25 - 2.0).collect();
    let b: Vec<f32> = (0..n * n).map(|k| ((k / n * 7 + k % n * 11) % 13) as f32 * 0.5 - 3.0).collect();
    let (da, db) = (DeviceBuffer::from_slice(&ctx, &a)?, DeviceBuffer::from_slice(&ctx, &b)?);
    let dc = DeviceBuffer::<f32>::new(&ctx, n * n)?;
    let tiles = ((n + 15) / 16) as u32;
    let cfg = LaunchConfig { grid: (tiles, tiles, 1), block: (16, 16, 1), shared_mem: 0 };
    let (start, end) = (Event::new(&ctx)?, Event::new(&ctx)?);
    f.launch(cfg, None, (&da, &db, &dc, n as i32))?; // warm-up
    start.record(None)?;
    for _ in 0..repeats {
        f.launch(cfg, None, (&da, &db, &dc, n as i32))?;
    }
    end.record(None)?;
    end.synchronize()?;
    let ms = end.elapsed_since(&start)? / repeats as f32;
    let c = dc.to_vec()?;
    let mut want = vec![0f32; n * n];
    for i in 0..n {
        for k in 0..n {
            let x = a[i * n + k];
            for j in 0..n {
                want[i * n + j] += x * b[k * n + j];
            }
        }
    }
    let ok = c == want;
    println!(
        "matmul: n={} {} hash={:016x} kernel_ms={:.4} gflops={:.1} {}",
        n,
        format,
        hash(&c),
        ms,
        2.0 * (n as f64).powi(3) / (ms as f64 * 1e6),
        if ok { "PASS" } else { "FAIL" }
    );
    Ok(ok)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let format = args.next().unwrap_or_else(|| "ptx".into());
    let repeats = args.next().and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    match run(n, &format, repeats) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("matmul: {}", e);
            std::process::exit(2);
        }
    }
}
