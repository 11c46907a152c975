//! steps: a program to checkpoint. It keeps a buffer on the GPU, and each
//! step adds one to every element with a kernel and prints a checksum of
//! what it reads back, then sleeps. A run checkpointed (CRIU and Cicada's
//! plugin, through the control socket), its server killed and restored
//! into another must print exactly what a run never interrupted prints.
//!
//!   steps [STEPS [MS [N]]]
use cicada::{Context, Device, DeviceBuffer, LaunchConfig, Module, Session};
use std::time::Duration;

mod common;
use common::kernels;

fn run(steps: u32, ms: u64, n: usize) -> cicada::Result<()> {
    let s = Session::from_env()?;
    let ctx = Context::new(&Device::get(&s, 0)?)?;
    let f = Module::from_bytes(&ctx, &kernels("ptx"))?.function("inc_u32")?;
    let init: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let buf = DeviceBuffer::from_slice(&ctx, &init)?;
    for step in 1..=steps {
        f.launch(LaunchConfig::for_items(n as u32, 256), None, (&buf, n as i32))?;
        let v = buf.to_vec()?;
        let sum = v.iter().fold(0u64, |h, &x| h.wrapping_mul(31).wrapping_add(x as u64));
        let right = v.iter().zip(&init).all(|(&x, &i)| x == i.wrapping_add(step));
        println!("step {} checksum {:016x} {}", step, sum, if right { "right" } else { "WRONG" });
        std::thread::sleep(Duration::from_millis(ms));
    }
    println!("done");
    Ok(())
}

fn main() {
    let mut a = std::env::args().skip(1);
    let steps = a.next().and_then(|x| x.parse().ok()).unwrap_or(10);
    let ms = a.next().and_then(|x| x.parse().ok()).unwrap_or(150);
    let n = a.next().and_then(|x| x.parse().ok()).unwrap_or(1 << 16);
    if let Err(e) = run(steps, ms, n) {
        println!("steps: {}", e);
        std::process::exit(2);
    }
}
