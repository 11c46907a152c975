//! The tests' gpu-servers: each test starts its own from the build tree
//! (build/bin/gpu-server, or CICADA_BUILD's), on the CPU stand-in for the
//! driver unless CICADA_TEST_DRIVER_ENV says otherwise (run-tests.sh
//! --gpu passes the real driver's). Every server has a deadline (timeout)
//! and is killed, with its workers, when its Server is dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn build_dir() -> PathBuf {
    match std::env::var("CICADA_BUILD") {
        Ok(b) => PathBuf::from(b),
        Err(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../build"),
    }
}

/// The built kernels (make builds them into build/rust/kernels).
pub fn kernels_dir() -> PathBuf {
    build_dir().join("rust/kernels")
}

pub fn kernel(ext: &str) -> Vec<u8> {
    let p = kernels_dir().join(format!("rust_kernels.{}", ext));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {} (run make first)", p.display(), e))
}

/// An example this test run built (target/<profile>/examples/NAME).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join(name)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct Server {
    pub dir: PathBuf,
    pub unix: String,
    pub tcp: String,
    pub tls: Option<String>,
    pub token_file: String,
    pub tls_cert: Option<String>,
    pid: u32,
}

impl Server {
    pub fn start(name: &str) -> Server {
        Server::start_with(name, false)
    }

    /// A server; with tls, also a tls: listener with a self-signed
    /// certificate for 127.0.0.1 (made with the openssl command).
    pub fn start_with(name: &str, tls: bool) -> Server {
        Server::start_args(name, tls, |_| Vec::new())
    }

    /// As start_with, with more options, made from the server's directory.
    pub fn start_args(name: &str, tls: bool, more: impl FnOnce(&Path) -> Vec<String>) -> Server {
        let b = build_dir();
        let server = b.join("bin/gpu-server");
        assert!(server.exists(), "{} is missing: run make first", server.display());
        let dir = std::env::temp_dir().join(format!("cicada-rust-{}-{}-{}", name, std::process::id(), free_port()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let token_file = dir.join("token");
        let token: String = (0..24).map(|i| (b'a' + ((i * 7 + std::process::id() as usize) % 26) as u8) as char).collect();
        std::fs::write(&token_file, format!("{}\n", token)).unwrap();
        let (tcp_port, tls_port) = (free_port(), free_port());
        let unix = format!("unix:{}/gpu.sock", dir.display());
        let mut args: Vec<String> = vec![
            "--listen".into(),
            unix.clone(),
            "--listen".into(),
            format!("tcp:127.0.0.1:{}", tcp_port),
            "--token-file".into(),
            token_file.display().to_string(),
            "--cache-dir".into(),
            dir.join("cache").display().to_string(),
            "--workers".into(),
            "2".into(),
        ];
        let mut cert = None;
        if tls {
            let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
            let ok = Command::new("timeout")
                .args(["60", "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
                .args(["-nodes", "-days", "2", "-subj", "/CN=cicada-test", "-addext", "subjectAltName=IP:127.0.0.1"])
                .arg("-keyout")
                .arg(&k)
                .arg("-out")
                .arg(&c)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "cannot make a test certificate (the openssl command)");
            args.extend([
                "--listen".into(),
                format!("tls:127.0.0.1:{}", tls_port),
                "--tls-cert".into(),
                c.display().to_string(),
                "--tls-key".into(),
                k.display().to_string(),
            ]);
            cert = Some(c.display().to_string());
        }
        args.extend(more(&dir));
        let driver_env = std::env::var("CICADA_TEST_DRIVER_ENV").unwrap_or_else(|_| {
            format!(
                "LD_LIBRARY_PATH={} CUDA_CACHE_PATH={}",
                b.join("tests/fakecuda").display(),
                dir.join("compute-cache").display()
            )
        });
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let mut cmd = Command::new("setsid");
        cmd.arg("timeout").args(["-k", "5", "300"]).arg(&server).args(&args);
        for kv in driver_env.split_whitespace() {
            if let Some((k, v)) = kv.split_once('=') {
                cmd.env(k, v);
            }
        }
        let child = cmd.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap();
        let s = Server {
            unix,
            tcp: format!("tcp:127.0.0.1:{}", tcp_port),
            tls: if tls { Some(format!("tls:127.0.0.1:{}", tls_port)) } else { None },
            token_file: token_file.display().to_string(),
            tls_cert: cert,
            pid: child.id(),
            dir,
        };
        std::mem::forget(child); // reaped by its kill below; no zombie outlives the test process
        s.wait_ready();
        s
    }

    fn wait_ready(&self) {
        let sock = self.dir.join("gpu.sock");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("gpu-server did not start: {}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn token(&self) -> Vec<u8> {
        std::fs::read(&self.token_file).unwrap()
    }

    /// Kills the server and every process of it (its workers): the
    /// session's process group, and any process naming its folder.
    pub fn kill(&self) {
        // (procps's kill takes "-9 -PID" as group 9: the group goes after --)
        let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{}", self.pid)]).stderr(Stdio::null()).status();
        let mark = self.dir.display().to_string();
        if let Ok(d) = std::fs::read_dir("/proc") {
            for e in d.flatten() {
                let pid = e.file_name().to_string_lossy().into_owned();
                if pid.parse::<u32>().is_err() {
                    continue;
                }
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains(&mark) {
                    let _ = Command::new("kill").args(["-s", "KILL", "--", &pid]).stderr(Stdio::null()).status();
                }
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if std::env::var("KEEP_T").is_err() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
