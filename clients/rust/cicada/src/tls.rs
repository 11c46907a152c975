//! tls.rs: where "tls:host:port" connections come from. The crate itself
//! is std alone, and std has no TLS: a TLS implementation is plugged in
//! once per process with set_connector. The crate beside this one,
//! cicada-tls, plugs in OpenSSL through Debian's openssl crate, with the
//! C client's checks (CICADA_TLS_CA, else the system's trust store; the
//! host name or address dialled must match the certificate).

use std::net::TcpStream;
use std::sync::RwLock;
use std::time::Duration;

use crate::link::Stream;
use crate::Error;

/// Makes a TLS session on a connected socket: (socket, host dialled,
/// handshake deadline) -> the stream of plaintext.
pub type Connector = fn(TcpStream, &str, Duration) -> Result<Box<dyn Stream>, Error>;

static CONNECTOR: RwLock<Option<Connector>> = RwLock::new(None);

/// Sets how this process makes TLS connections (cicada_tls::install).
pub fn set_connector(c: Connector) {
    *CONNECTOR.write().unwrap_or_else(|e| e.into_inner()) = Some(c);
}

pub(crate) fn wrap(s: TcpStream, host: &str, timeout: Duration) -> Result<Box<dyn Stream>, Error> {
    let c = *CONNECTOR.read().unwrap_or_else(|e| e.into_inner());
    match c {
        Some(c) => c(s, host, timeout),
        None => Err(Error::Connect(
            "tls: addresses need a TLS implementation: link the cicada-tls crate and call cicada_tls::install()"
                .into(),
        )),
    }
}
