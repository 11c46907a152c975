//! cicada-tls: "tls:host:port" for the cicada crate, through OpenSSL
//! (Debian's openssl crate), with the C client's checks (wire/tls.c):
//! TLS 1.2 or newer; the server's certificate must chain to CICADA_TLS_CA
//! (a PEM file: a CA, or the server's self-signed certificate), else to
//! the system's trust store, and match the host name or address dialled.
//! Inside TLS the usual challenge and token proof still run.
//!
//! For a server with --tls-client-ca (mutual TLS) the client presents the
//! certificate and key that CICADA_TLS_CERT and CICADA_TLS_KEY name (PEM
//! files); the server names it by the certificate's subject CN. As the C
//! client does, it waits for the server's first bytes before it calls the
//! connection made, so that a certificate refused after a TLS 1.3
//! handshake is an error of the connect, saying so.
//!
//! ```no_run
//! cicada_tls::install();
//! let s = cicada::Session::from_env()?; // CICADA_SERVER=tls:gpunode:7778
//! # Ok::<(), cicada::Error>(())
//! ```

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cicada::link::Stream;
use cicada::Error;
use openssl::ssl::{
    ErrorCode, HandshakeError, SslConnector, SslConnectorBuilder, SslFiletype, SslMethod, SslStream, SslVerifyMode,
    SslVersion,
};
use openssl::x509::X509VerifyResult;

/// Makes tls: addresses work in this process.
pub fn install() {
    cicada::tls::set_connector(connect);
}

struct Tls(SslStream<TcpStream>);

impl Read for Tls {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.0.read(b)
    }
}

impl Write for Tls {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Stream for Tls {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.0.get_ref().set_read_timeout(t)
    }
    fn shutdown(&self) {
        let _ = self.0.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Connect(format!("TLS: {}: {}", what, e))
}

/// The client's certificate and key, if CICADA_TLS_CERT and CICADA_TLS_KEY
/// name them.
fn client_cert(b: &mut SslConnectorBuilder) -> Result<(), Error> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    match (var("CICADA_TLS_CERT"), var("CICADA_TLS_KEY")) {
        (None, None) => Ok(()),
        (Some(cert), Some(key)) => {
            b.set_certificate_chain_file(&cert).map_err(|e| fail("cannot load CICADA_TLS_CERT", e))?;
            b.set_private_key_file(&key, SslFiletype::PEM)
                .and_then(|_| b.check_private_key())
                .map_err(|e| fail("cannot load CICADA_TLS_KEY (or it does not fit CICADA_TLS_CERT)", e))
        }
        (c, _) => Err(Error::Connect(format!(
            "TLS: CICADA_TLS_CERT and CICADA_TLS_KEY go together ({} is not set)",
            if c.is_some() { "CICADA_TLS_KEY" } else { "CICADA_TLS_CERT" }
        ))),
    }
}

/// Waits for the server's first bytes (its challenge): a server that
/// refused the client's certificate says so with an alert here.
fn first_bytes(t: &mut SslStream<TcpStream>) -> Result<(), Error> {
    let e = match t.ssl_peek(&mut [0u8; 1]) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    let alert = e.ssl_error().map_or(false, |s| {
        s.errors().iter().any(|x| x.reason().map_or(false, |r| r.contains("alert")))
    });
    if alert {
        return Err(Error::Connect(format!(
            "TLS: the server refused this client's certificate, or its lack of one ({}); CICADA_TLS_CERT and \
             CICADA_TLS_KEY name a certificate of the server's client CA",
            e
        )));
    }
    let closed = e.code() == ErrorCode::ZERO_RETURN || e.code() == ErrorCode::SYSCALL;
    Err(fail("no challenge from the server", if closed { "connection closed".into() } else { e.to_string() }))
}

fn connect(s: TcpStream, host: &str, timeout: Duration) -> Result<Box<dyn Stream>, Error> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| fail("no context", e))?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(|e| fail("no context", e))?;
    b.set_verify(SslVerifyMode::PEER);
    match std::env::var("CICADA_TLS_CA") {
        Ok(ca) if !ca.is_empty() => b.set_ca_file(&ca).map_err(|e| fail("cannot load CICADA_TLS_CA", e))?,
        _ => b.set_default_verify_paths().map_err(|e| fail("cannot load the system's trust store", e))?,
    }
    client_cert(&mut b)?;
    // the name or address dialled must be the certificate's (the
    // connector checks a name, and an IP address as one)
    let cfg = b.build().configure().map_err(|e| fail("no session", e))?;
    s.set_read_timeout(Some(timeout)).map_err(|e| fail("socket", e))?;
    s.set_write_timeout(Some(timeout)).map_err(|e| fail("socket", e))?;
    let start = Instant::now();
    let mut hs = cfg.connect(host, s);
    loop {
        match hs {
            Ok(mut t) => {
                first_bytes(&mut t)?;
                let _ = t.get_ref().set_write_timeout(None);
                return Ok(Box::new(Tls(t)));
            }
            Err(HandshakeError::WouldBlock(m)) if start.elapsed() < timeout => hs = m.handshake(),
            Err(HandshakeError::Failure(m)) => {
                let v = m.ssl().verify_result();
                if v != X509VerifyResult::OK {
                    return Err(Error::Connect(format!(
                        "TLS: the server's certificate is not trusted ({}); CICADA_TLS_CA names the file of its CA",
                        v.error_string()
                    )));
                }
                let code = m.error().code();
                return Err(fail("handshake failed", if code == ErrorCode::SYSCALL { "connection closed".into() } else { m.error().to_string() }));
            }
            Err(HandshakeError::WouldBlock(_)) => return Err(fail("handshake", "nothing within the deadline")),
            Err(HandshakeError::SetupFailure(e)) => return Err(fail("setup", e)),
        }
    }
}
