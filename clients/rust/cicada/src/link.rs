//! link.rs: a connection to a gpu-server as wire/addr.c and wire/auth.c
//! make one: "unix:/path", "tcp:host:port" or "tls:host:port" (TLS only
//! with the crate's `tls` feature), the server's challenge, and ONC RPC
//! record marking on the byte stream. No shared memory: that needs a
//! process on the server's node passing a memfd, which a Rust client
//! (or a unikernel) does not; every byte goes on the socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::Error;

const MARK_LAST: u32 = 0x8000_0000;
const CHALLENGE_MAGIC: &[u8; 8] = b"CICADACH";
pub const NONCE_LEN: usize = 32;
/// The largest record either side accepts (wire.h: WIRE_MAX_RECORD).
pub const MAX_RECORD: usize = crate::proto::CICADA_IMAGE_MAX as usize + 65536;

/// A parsed server address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    Unix(String),
    Tcp { host: String, port: u16, tls: bool },
}

impl Addr {
    /// As wire_parse_addr: "unix:/path", "tcp:host:port", "tls:host:port"
    /// (an IPv6 host in brackets).
    pub fn parse(text: &str) -> Result<Addr, Error> {
        let bad = || Error::Connect(format!(
            "bad address '{}' (expected unix:/path, tcp:host:port or tls:host:port)", text));
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() || path.len() >= 108 {
                return Err(bad());
            }
            return Ok(Addr::Unix(path.to_string()));
        }
        let (rest, tls) = match (text.strip_prefix("tcp:"), text.strip_prefix("tls:")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Err(bad()),
        };
        let colon = rest.rfind(':').ok_or_else(bad)?;
        let (mut host, port) = (&rest[..colon], &rest[colon + 1..]);
        if host.is_empty() || host.len() >= 256 {
            return Err(bad());
        }
        if host.starts_with('[') && host.ends_with(']') && host.len() >= 2 {
            host = &host[1..host.len() - 1];
        }
        let port: u16 = port.parse().map_err(|_| bad())?;
        Ok(Addr::Tcp { host: host.to_string(), port, tls })
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Addr::Tcp { .. })
    }
}

/// The byte stream under a connection.
pub trait Stream: Read + Write + Send {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn shutdown(&self);
}

impl Stream for UnixStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, t)
    }
    fn shutdown(&self) {
        let _ = UnixStream::shutdown(self, Shutdown::Both);
    }
}

impl Stream for TcpStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
    fn shutdown(&self) {
        let _ = TcpStream::shutdown(self, Shutdown::Both);
    }
}

/// Dials addr within timeout; TLS verifies the server (CICADA_TLS_CA).
pub fn dial(addr: &Addr, timeout: Duration) -> Result<Box<dyn Stream>, Error> {
    match addr {
        Addr::Unix(path) => {
            let s = UnixStream::connect(path)
                .map_err(|e| Error::Connect(format!("cannot reach gpu-server at unix:{}: {}", path, e)))?;
            Ok(Box::new(s))
        }
        Addr::Tcp { host, port, tls } => {
            let what = format!("{}:{}", host, port);
            let addrs = (host.as_str(), *port)
                .to_socket_addrs()
                .map_err(|e| Error::Connect(format!("cannot resolve {}: {}", what, e)))?;
            let mut last = None;
            for a in addrs {
                match TcpStream::connect_timeout(&a, timeout) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        if *tls {
                            return crate::tls::wrap(s, host, timeout);
                        }
                        return Ok(Box::new(s));
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(Error::Connect(format!(
                "cannot reach gpu-server at {}: {}",
                what,
                last.map(|e| e.to_string()).unwrap_or_else(|| "no address".into())
            )))
        }
    }
}

/// The server's challenge: "CICADACH" and 32 random bytes, within timeout.
pub fn recv_challenge(s: &mut dyn Stream, timeout: Duration) -> Result<[u8; NONCE_LEN], Error> {
    let mut msg = [0u8; 8 + NONCE_LEN];
    s.set_read_timeout(Some(timeout)).map_err(|e| Error::Connect(e.to_string()))?;
    s.read_exact(&mut msg).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Connect(format!(
            "no challenge from the server within {} s", timeout.as_secs())),
        _ => Error::Connect("the server closed the connection before its challenge".into()),
    })?;
    if &msg[..8] != CHALLENGE_MAGIC {
        return Err(Error::Connect("not a Cicada gpu-server (or one older than this client)".into()));
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&msg[8..]);
    Ok(nonce)
}

/// The proof of token for a challenge (wire_token_proof); empty without
/// a token.
pub fn token_proof(token: &[u8], nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    if token.is_empty() {
        return Vec::new();
    }
    let mut msg = b"cicada hello v1\0".to_vec();
    msg.extend_from_slice(nonce);
    crate::hash::hmac_sha256(token, &msg).to_vec()
}

/// Sends one record (one fragment).
pub fn send_record(s: &mut dyn Stream, body: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(MARK_LAST | body.len() as u32).to_be_bytes());
    buf.extend_from_slice(body);
    s.write_all(&buf)?;
    s.flush()
}

/// Reads one record, all its fragments, of at most max bytes.
pub fn recv_record(s: &mut dyn Stream, max: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        s.read_exact(&mut mark)?;
        let mark = u32::from_be_bytes(mark);
        let len = (mark & !MARK_LAST) as usize;
        if len > max || out.len() + len > max {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "record larger than the protocol allows"));
        }
        let at = out.len();
        out.resize(at + len, 0);
        s.read_exact(&mut out[at..])?;
        if mark & MARK_LAST != 0 {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_the_c_client_parses_them() {
        assert_eq!(Addr::parse("unix:/run/x.sock").unwrap(), Addr::Unix("/run/x.sock".into()));
        assert_eq!(
            Addr::parse("tcp:[::1]:7777").unwrap(),
            Addr::Tcp { host: "::1".into(), port: 7777, tls: false }
        );
        assert_eq!(
            Addr::parse("tls:gpu.example:1").unwrap(),
            Addr::Tcp { host: "gpu.example".into(), port: 1, tls: true }
        );
        for bad in ["", "unix:", "tcp:host", "tcp::1", "tcp:host:", "tcp:host:x", "udp:h:1"] {
            assert!(Addr::parse(bad).is_err(), "{}", bad);
        }
    }
}
