//! no_driver: a GPU used from a place with no driver at all. It first
//! proves there is none: no /dev/nvidia* device file, no libcuda (nor
//! libcicada) mapped in the process; then it reads the remote device's
//! facts and adds two vectors on it. Run it in a container or a mount
//! namespace with an empty /dev (tests/run-tests.sh's rust test does).
use cicada::{Context, Device, DeviceBuffer, LaunchConfig, Module, Session};

mod common;
use common::kernels;

/// What of the driver this process can see: device files, mapped libraries.
fn driver_traces() -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(d) = std::fs::read_dir("/dev") {
        for e in d.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("nvidia") {
                found.push(format!("/dev/{}", name));
            }
        }
    }
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for lib in ["libcuda.so", "libcicada.so", "libnvidia"] {
        if maps.contains(lib) {
            found.push(format!("{} mapped", lib));
        }
    }
    found
}

fn run() -> cicada::Result<bool> {
    let traces = driver_traces();
    if !traces.is_empty() {
        println!("no_driver: the driver is here after all: {}", traces.join(", "));
        return Ok(false);
    }
    println!("no_driver: no /dev/nvidia*, no libcuda in this process");
    let s = Session::from_env()?;
    let dev = Device::get(&s, 0)?;
    let (major, minor) = dev.compute_capability()?;
    println!(
        "no_driver: {} device(s); device 0: {}, compute {}.{}, {} MiB, driver {}",
        s.device_count()?,
        dev.name()?,
        major,
        minor,
        dev.total_memory()? >> 20,
        s.driver_version()?
    );
    let ctx = Context::new(&dev)?;
    let f = Module::from_bytes(&ctx, &kernels("ptx"))?.function("vec_add")?;
    let n = 4096;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (da, db, dc) = (
        DeviceBuffer::from_slice(&ctx, &a)?,
        DeviceBuffer::from_slice(&ctx, &a)?,
        DeviceBuffer::<f32>::new(&ctx, n)?,
    );
    f.launch(LaunchConfig::for_items(n as u32, 128), None, (&da, &db, &dc, n as i32))?;
    let ok = dc.to_vec()?.iter().enumerate().all(|(i, &c)| c == 2.0 * i as f32);
    println!("no_driver: vec_add of {} on the remote GPU: {}", n, if ok { "PASS" } else { "FAIL" });
    Ok(ok && driver_traces().is_empty())
}

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("no_driver: {}", e);
            std::process::exit(2);
        }
    }
}
