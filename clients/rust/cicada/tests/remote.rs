//! The Rust client against gpu-servers (the CPU stand-in for the driver
//! in CI): the examples over a unix socket and TCP, the safe API, the
//! generated raw calls, and every error path: a wrong token, a server
//! gone mid-call, bad PTX, out-of-range copies, misused launches.
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use cicada::proto::{self, Calls, DtohArgs};
use cicada::{Context, Device, DeviceBuffer, Error, Event, LaunchConfig, Module, Options, Session, Stream};
use common::Server;

fn opts(s: &Server, tcp: bool) -> Options {
    let o = if tcp { Options::new(&s.tcp).token(&s.token()) } else { Options::new(&s.unix) };
    Options { control: false, connect_timeout: Duration::from_secs(20), ..o }
}

fn ctx_of(o: &Options) -> Context {
    let s = Session::connect(o).expect("a session");
    Context::new(&Device::get(&s, 0).unwrap()).unwrap()
}

/// Runs an example against the server; its stdout, which must end well.
fn run_example(s: &Server, tcp: bool, name: &str, args: &[&str]) -> String {
    let mut c = Command::new("timeout");
    c.arg("60").arg(common::example(name)).args(args);
    c.env("CICADA_RUST_KERNELS", common::kernels_dir()).env("CICADA_CONTROL", "0");
    c.env("CICADA_SERVER", if tcp { &s.tcp } else { &s.unix });
    if tcp {
        c.env("CICADA_TOKEN_FILE", &s.token_file);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {:?}: {}\n{}{}",
        name,
        args,
        out.status,
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn examples_over_unix_and_tcp() {
    let s = Server::start("examples");
    for tcp in [false, true] {
        let out = run_example(&s, tcp, "vector_add", &["100000"]);
        assert!(out.contains("0 wrong") && out.contains("PASS"), "{}", out);
        for format in ["ptx", "cubin", "fatbin"] {
            let out = run_example(&s, tcp, "matmul", &["40", format, "2"]);
            assert!(out.contains(" PASS") && out.contains(format), "{}", out);
        }
        let out = run_example(&s, tcp, "steps", &["3", "1", "1000"]);
        assert_eq!(out.matches(" right").count(), 3, "{}", out);
        assert!(out.ends_with("done\n"), "{}", out);
        let out = run_example(&s, tcp, "no_driver", &[]);
        assert!(out.contains("vec_add of 4096 on the remote GPU: PASS"), "{}", out);
    }
}

#[test]
fn buffers_streams_events_and_typed_launches() {
    let s = Server::start("api");
    let ctx = ctx_of(&opts(&s, true));
    let dev = Device::get(ctx.session(), 0).unwrap();
    assert!(!dev.name().unwrap().is_empty());
    assert!(dev.total_memory().unwrap() > 0);
    let m = Module::from_bytes(&ctx, &common::kernel("ptx")).unwrap();
    let inc = m.function("inc_u32").unwrap();
    assert_eq!(inc.param_count(), 2);
    // a buffer bigger than one message's chunk (8 MiB) crosses in pieces
    let n = (9 << 20) / 4 + 3;
    let init: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5a5a).collect();
    let buf = DeviceBuffer::from_slice(&ctx, &init).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let (e0, e1) = (Event::new(&ctx).unwrap(), Event::new(&ctx).unwrap());
    e0.record(Some(&stream)).unwrap();
    for _ in 0..3 {
        inc.launch(LaunchConfig::for_items(n as u32, 256), Some(&stream), (&buf, n as i32)).unwrap();
    }
    e1.record(Some(&stream)).unwrap();
    stream.synchronize().unwrap();
    assert!(e1.elapsed_since(&e0).unwrap() >= 0.0);
    let got = buf.to_vec().unwrap();
    assert!(got.iter().zip(&init).all(|(&g, &i)| g == i + 3));
    // part of a buffer, and a write ordered on a stream
    let mut part = vec![0u32; 5];
    buf.read_at(n - 5, &mut part).unwrap();
    assert_eq!(part, init[n - 5..].iter().map(|x| x + 3).collect::<Vec<_>>());
    stream.write(&buf, &vec![7u32; 100]).unwrap();
    stream.synchronize().unwrap();
    buf.read_at(0, &mut part).unwrap();
    assert_eq!(part, vec![7; 5]);
    buf.memset(0).unwrap();
    buf.read_at(0, &mut part).unwrap();
    assert_eq!(part, vec![0; 5]);
    // a launch is checked against the kernel's parameters
    let e = inc.launch(LaunchConfig::for_items(4, 4), None, (&buf,)).unwrap_err();
    assert_eq!((e.code(), e.name()), (proto::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"));
    assert!(e.to_string().contains("takes 2 parameters, 1 given"), "{}", e);
    let e = inc.launch(LaunchConfig::for_items(4, 4), None, (&buf, 4u64)).unwrap_err();
    assert!(e.to_string().contains("parameter 1 takes 4 bytes, 8 given"), "{}", e);
    ctx.synchronize().unwrap();
}

#[test]
fn raw_calls_generated_from_the_table() {
    let s = Server::start("raw");
    let ses = Session::connect(&opts(&s, false)).unwrap();
    let n = ses.raw(|c| c.cuDeviceGetCount()).unwrap();
    assert_eq!(n, ses.device_count().unwrap());
    assert!(n >= 1);
    let ctx = ses.raw(|c| c.cuDevicePrimaryCtxRetain(0)).unwrap();
    ses.raw(|c| c.cuCtxSetCurrent(ctx)).unwrap();
    let ptr = ses.raw(|c| c.cuMemAlloc_v2(4096)).unwrap();
    let (base, size) = ses.raw(|c| c.cuMemGetAddressRange_v2(ptr + 100)).unwrap();
    assert_eq!((base, size), (ptr, 4096));
    ses.raw(|c| c.cuMemFree_v2(ptr)).unwrap();
    let e = ses.raw(|c| c.cuMemFree_v2(ptr)).unwrap_err();
    assert_ne!(e.code(), 0);
    assert_eq!(proto::proc_name(proto::P_cuMemAlloc_v2), "cuMemAlloc_v2");
    ses.raw(|c| c.cuDevicePrimaryCtxRelease_v2(0)).unwrap();
}

#[test]
fn a_wrong_token_or_none_is_refused() {
    let s = Server::start("token");
    let wrong = Options { token: b"not the token".to_vec(), ..opts(&s, true) };
    match Session::connect(&wrong) {
        Err(e @ Error::Refused(..)) => {
            assert_eq!(e.name(), "CUDA_ERROR_NOT_PERMITTED");
            assert!(e.to_string().contains("token"), "{}", e);
        }
        Err(e) => panic!("refused otherwise: {}", e),
        Ok(_) => panic!("a wrong token was let in"),
    }
    let none = Options { token: vec![], ..opts(&s, true) };
    let e = Session::connect(&none).err().expect("no token, no session");
    assert!(e.to_string().contains("requires a token"), "{}", e);
    // the right one, read from the file as CICADA_TOKEN_FILE is (its newline trimmed)
    let right = Options { control: false, ..Options::new(&s.tcp).token_file(&s.token_file) };
    Session::connect(&right).expect("the right token");
    // not a server at all: a listener that says nothing Cicada says
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        use std::io::Write;
        let (mut c, _) = l.accept().unwrap();
        let _ = c.write_all(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let e = Session::connect(&Options { connect_timeout: Duration::from_secs(5), ..Options::new(&format!("tcp:127.0.0.1:{}", port)) })
        .err()
        .unwrap();
    assert!(e.to_string().contains("not a Cicada gpu-server"), "{}", e);
    assert_eq!(e.name(), "CUDA_ERROR_NO_DEVICE");
    t.join().unwrap();
    let e = Session::connect(&Options::new("tcp:nowhere")).err().unwrap();
    assert!(e.to_string().contains("bad address"), "{}", e);
    let e = Session::connect(&Options::new(&format!("unix:{}/none.sock", s.dir.display()))).err().unwrap();
    assert!(e.to_string().contains("cannot reach"), "{}", e);
}

#[test]
fn a_server_gone_mid_call_fails_every_call_after() {
    for tcp in [false, true] {
        let s = Server::start(if tcp { "gone-tcp" } else { "gone-unix" });
        let ctx = ctx_of(&opts(&s, tcp));
        let f = Module::from_bytes(&ctx, &common::kernel("ptx")).unwrap().function("inc_u32").unwrap();
        let n = 1 << 20;
        let buf = DeviceBuffer::<u32>::from_slice(&ctx, &vec![0; n]).unwrap();
        let killer = {
            let t0 = Instant::now();
            std::thread::sleep(Duration::from_millis(200));
            s.kill();
            t0
        };
        // calls in flight as it died, or made after: each fails, none hangs
        let t0 = Instant::now();
        let mut first = None;
        for _ in 0..50 {
            let r = f
                .launch(LaunchConfig::for_items(n as u32, 256), None, (&buf, n as i32))
                .and_then(|_| buf.to_vec().map(|_| ()));
            if let Err(e) = r {
                first = Some(e);
                break;
            }
        }
        let e = first.expect("calls to a dead server fail");
        assert!(matches!(e, Error::Lost(_)), "{:?}", e);
        assert_eq!(e.name(), "CUDA_ERROR_DEVICE_UNAVAILABLE");
        assert!(t0.elapsed() < Duration::from_secs(20), "failing took {:?}", t0.elapsed());
        let again = ctx.synchronize().unwrap_err();
        assert!(matches!(again, Error::Lost(_)), "{:?}", again);
        let _ = killer;
        drop(buf); // releasing on a lost session neither hangs nor panics
    }
}

#[test]
fn bad_images_are_refused_with_the_jit_log() {
    let s = Server::start("ptx");
    let ctx = ctx_of(&opts(&s, false));
    let bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken(\n{\n  this is not ptx;\n}\n";
    let e = Module::from_ptx(&ctx, bad).err().expect("bad PTX does not load");
    assert_eq!(e.name(), "CUDA_ERROR_INVALID_PTX", "{}", e);
    let e = Module::from_bytes(&ctx, &[0u8, 1, 2, 3, 200, 201]).err().unwrap();
    assert_eq!(e.name(), "CUDA_ERROR_INVALID_IMAGE");
    let m = Module::from_bytes(&ctx, &common::kernel("ptx")).unwrap();
    let e = m.function("no_such_kernel").err().unwrap();
    assert_eq!(e.name(), "CUDA_ERROR_NOT_FOUND");
    // the session goes on after each refusal
    assert!(m.function("vec_add").is_ok());
}

#[test]
fn out_of_range_copies_are_refused() {
    let s = Server::start("range");
    let ctx = ctx_of(&opts(&s, true));
    let buf = DeviceBuffer::<f32>::new(&ctx, 100).unwrap();
    let mut out = vec![0f32; 10];
    for (at, len) in [(95usize, 10usize), (100, 1), (usize::MAX - 3, 10)] {
        let e = buf.read_at(at, &mut out[..len]).unwrap_err();
        assert_eq!(e.name(), "CUDA_ERROR_INVALID_VALUE", "{}", e);
        let e = buf.write_at(at, &out[..len]).unwrap_err();
        assert_eq!(e.name(), "CUDA_ERROR_INVALID_VALUE", "{}", e);
    }
    assert!(buf.copy_from(&[1.0; 99]).is_err());
    // past the allocation through the raw protocol: the server refuses it
    let ses = ctx.session().clone();
    let big = proto::CICADA_CHUNK_MAX as u64 + 1;
    let e = ses
        .raw(|c| c.memcpy_dtoh(&DtohArgs { src: buf.device_ptr(), size: big, ..Default::default() }))
        .unwrap_err();
    assert_eq!(e.name(), "CUDA_ERROR_INVALID_VALUE", "{}", e);
    let e = ses
        .raw(|c| c.memcpy_dtoh(&DtohArgs { src: buf.device_ptr() + (64 << 20), size: 16, ..Default::default() }))
        .unwrap_err();
    assert_ne!(e.code(), 0, "a copy from no allocation succeeded");
    // and the session is still good
    buf.read_at(0, &mut out).unwrap();
}
