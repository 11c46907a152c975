//! The Rust client over TLS (cicada-tls): a session through a server's
//! tls: listener (self-signed certificate for 127.0.0.1, trusted through
//! CICADA_TLS_CA) runs a kernel; a client that does not trust the
//! certificate, or speaks plain TCP at the TLS port, is refused with one
//! line; a wrong token is refused inside TLS. Then mutual TLS: a server
//! with --tls-client-ca refuses a client without a certificate, saying
//! so, and serves one with a certificate of its CA (CICADA_TLS_CERT and
//! CICADA_TLS_KEY). One test: CICADA_TLS_* are the process's environment.
#[path = "../../cicada/tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cicada::{Context, Device, DeviceBuffer, LaunchConfig, Module, Options, Session};

#[test]
fn tls_sessions() {
    cicada_tls::install();
    let s = common::Server::start_with("tls", true);
    let addr = s.tls.clone().unwrap();
    let o = Options { control: false, connect_timeout: Duration::from_secs(20), ..Options::new(&addr).token(&s.token()) };

    std::env::set_var("CICADA_TLS_CA", s.tls_cert.as_ref().unwrap());
    let ses = Session::connect(&o).expect("a TLS session");
    let ctx = Context::new(&Device::get(&ses, 0).unwrap()).unwrap();
    let f = Module::from_bytes(&ctx, &common::kernel("ptx")).unwrap().function("vec_add").unwrap();
    let n = 3 << 20; // more than a TLS record, and than a message chunk
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (da, db, dc) = (
        DeviceBuffer::from_slice(&ctx, &a).unwrap(),
        DeviceBuffer::from_slice(&ctx, &a).unwrap(),
        DeviceBuffer::<f32>::new(&ctx, n).unwrap(),
    );
    f.launch(LaunchConfig::for_items(n as u32, 256), None, (&da, &db, &dc, n as i32)).unwrap();
    assert!(dc.to_vec().unwrap().iter().enumerate().all(|(i, &c)| c == 2.0 * i as f32));

    let wrong = Options { token: b"wrong".to_vec(), ..o.clone() };
    let e = Session::connect(&wrong).err().expect("a wrong token over TLS");
    assert_eq!(e.name(), "CUDA_ERROR_NOT_PERMITTED", "{}", e);

    std::env::set_var("CICADA_TLS_CA", "");
    let e = Session::connect(&o).err().expect("an untrusted certificate");
    assert!(e.to_string().contains("certificate is not trusted"), "{}", e);
    assert_eq!(e.name(), "CUDA_ERROR_NO_DEVICE");

    let plain = Options { server: addr.replace("tls:", "tcp:"), connect_timeout: Duration::from_secs(3), ..o.clone() };
    let e = Session::connect(&plain).err().expect("plain TCP at the TLS port");
    assert_eq!(e.name(), "CUDA_ERROR_NO_DEVICE", "{}", e);

    drop((da, db, dc, f, ctx, ses));
    mutual_tls();
}

fn openssl(args: &[&str]) -> bool {
    Command::new("timeout")
        .arg("60")
        .arg("openssl")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A CA and a certificate of it for client "alice", in dir.
fn client_ca(dir: &Path) -> Vec<String> {
    let p = |n: &str| dir.join(n).display().to_string();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let (ca_key, ca_crt, key, csr, crt) = (p("ca.key"), p("ca.crt"), p("alice.key"), p("alice.csr"), p("alice.crt"));
    let ca = [&["req", "-x509"][..], &ec, &["-days", "2", "-subj", "/CN=ca", "-keyout", &ca_key, "-out", &ca_crt]];
    let req = [&["req"][..], &ec, &["-subj", "/CN=alice", "-keyout", &key, "-out", &csr]];
    let sign = ["x509", "-req", "-in", &csr, "-CA", &ca_crt, "-CAkey", &ca_key, "-CAcreateserial", "-days", "2", "-out", &crt];
    assert!(openssl(&ca.concat()) && openssl(&req.concat()) && openssl(&sign), "cannot make test certificates");
    vec!["--tls-client-ca".into(), p("ca.crt")]
}

fn mutual_tls() {
    let s = common::Server::start_args("mtls", true, client_ca);
    let o = Options {
        control: false,
        connect_timeout: Duration::from_secs(20),
        ..Options::new(s.tls.as_ref().unwrap()).token(&s.token())
    };
    std::env::set_var("CICADA_TLS_CA", s.tls_cert.as_ref().unwrap());
    let e = Session::connect(&o).err().expect("no client certificate");
    assert!(e.to_string().contains("refused this client's certificate"), "{}", e);

    std::env::set_var("CICADA_TLS_CERT", s.dir.join("alice.crt"));
    std::env::set_var("CICADA_TLS_KEY", s.dir.join("alice.key"));
    let ses = Session::connect(&o).expect("a session with alice's certificate");
    assert!(Device::get(&ses, 0).is_ok());
    for v in ["CICADA_TLS_CA", "CICADA_TLS_CERT", "CICADA_TLS_KEY"] {
        std::env::remove_var(v);
    }
}
