//! vector_add: adds two vectors on a remote GPU and checks the sum.
//!
//!   CICADA_SERVER=tcp:gpunode:7777 CICADA_TOKEN_FILE=/etc/cicada/token vector_add [N]
//!
//! It loads the PTX of build/rust/kernels/rust_kernels.ptx (or of
//! CICADA_RUST_KERNELS's folder), which the server's driver compiles, and
//! exits 0 only if every element is what the CPU computes.
use cicada::{Context, Device, DeviceBuffer, Event, LaunchConfig, Module, Session};
use std::time::Instant;

mod common;
use common::kernels;

fn run(n: usize) -> cicada::Result<bool> {
    let t0 = Instant::now();
    let s = Session::from_env()?;
    let dev = Device::get(&s, 0)?;
    let ctx = Context::new(&dev)?;
    let f = Module::from_bytes(&ctx, &kernels("ptx"))?.function("vec_add")?;
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let b: Vec<f32> = (0..n).map(|i| ((i * 7) % 1000) as f32 * 0.002).collect();
    let (da, db) = (DeviceBuffer::from_slice(&ctx, &a)?, DeviceBuffer::from_slice(&ctx, &b)?);
    let dc = DeviceBuffer::<f32>::new(&ctx, n)?;
    let (start, end) = (Event::new(&ctx)?, Event::new(&ctx)?);
    start.record(None)?;
    f.launch(LaunchConfig::for_items(n as u32, 256), None, (&da, &db, &dc, n as i32))?;
    end.record(None)?;
    end.synchronize()?;
    let kernel_ms = end.elapsed_since(&start)?;
    let c = dc.to_vec()?;
    let bad = (0..n).filter(|&i| c[i] != a[i] + b[i]).count();
    println!(
        "vector_add: n={} on {} ({}) via {}: {} wrong; kernel {:.3} ms, all {:.1} ms: {}",
        n,
        dev.name()?,
        s.driver_version()?,
        s.server(),
        bad,
        kernel_ms,
        t0.elapsed().as_secs_f64() * 1e3,
        if bad == 0 { "PASS" } else { "FAIL" }
    );
    Ok(bad == 0)
}

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1 << 20);
    match run(n) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("vector_add: {}", e);
            std::process::exit(2);
        }
    }
}
