//! session.rs: a session with a gpu-server: one connection, one worker
//! on the server holding everything the program made on the GPU. Calls
//! are serialised on it. The server keeps a current context per
//! session: a call made through a Context makes that context current
//! first (one pipelined cuCtxSetCurrent, only when it changes).
//!
//! A session can be paused (its worker finishes the device's work and
//! keeps the state under a ticket; the connection closes) and resumed,
//! possibly on another server after a restore: that is what CRIU's
//! plugin does through the control socket (control.rs).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::conn::{Conn, HelloInfo};
use crate::proto::{self, Calls, NameRes, Scalars};
use crate::{control, Error, Result};

/// How to reach a server, as the C client reads it from the environment.
#[derive(Clone)]
pub struct Options {
    /// "unix:/path", "tcp:host:port" or "tls:host:port".
    pub server: String,
    /// The token (TCP and TLS servers), proved, never sent.
    pub token: Vec<u8>,
    /// Where the token was read from (a checkpoint names it, not the token).
    pub token_file: Option<String>,
    /// How long the challenge and the hello's answer may take.
    pub connect_timeout: Duration,
    /// "=" and CUDA_VISIBLE_DEVICES, for the worker to apply; "" for none.
    pub devices: String,
    /// GPUs to be placed on (0: the server's default).
    pub gpus: u32,
    /// Serve the control socket, so CRIU's plugin can checkpoint the process.
    pub control: bool,
}

fn trim_token(mut t: Vec<u8>) -> Vec<u8> {
    while matches!(t.last(), Some(b'\n') | Some(b'\r') | Some(b' ')) {
        t.pop();
    }
    t.truncate(proto::CICADA_TOKEN_MAX as usize);
    t
}

impl Options {
    /// CICADA_SERVER (default unix:/run/cicada/gpu.sock), CICADA_TOKEN_FILE
    /// or CICADA_TOKEN, CICADA_CONNECT_TIMEOUT (s, 120), CUDA_VISIBLE_DEVICES,
    /// CICADA_GPUS, CICADA_CONTROL=0 (no control socket).
    pub fn from_env() -> Options {
        let var = |k: &str| std::env::var(k).ok();
        let mut o = Options::new(&var("CICADA_SERVER").unwrap_or_else(|| "unix:/run/cicada/gpu.sock".into()));
        if let Some(f) = var("CICADA_TOKEN_FILE") {
            o = o.token_file(&f);
        } else if let Some(t) = var("CICADA_TOKEN") {
            o.token = trim_token(t.into_bytes());
        }
        if let Some(s) = var("CICADA_CONNECT_TIMEOUT").and_then(|s| s.parse::<u64>().ok()).filter(|s| *s > 0) {
            o.connect_timeout = Duration::from_secs(s);
        }
        if let Some(d) = var("CUDA_VISIBLE_DEVICES") {
            o.devices = format!("={}", d);
        }
        o.gpus = var("CICADA_GPUS").and_then(|g| g.parse().ok()).unwrap_or(0);
        o.control = var("CICADA_CONTROL").as_deref() != Some("0");
        o
    }

    /// A server's address, no token, the defaults.
    pub fn new(server: &str) -> Options {
        Options {
            server: server.to_string(),
            token: Vec::new(),
            token_file: None,
            connect_timeout: Duration::from_secs(120),
            devices: String::new(),
            gpus: 0,
            control: true,
        }
    }

    /// The token, read from path (an unreadable file gives no token; the
    /// server then refuses a TCP session, saying why).
    pub fn token_file(mut self, path: &str) -> Options {
        self.token = trim_token(std::fs::read(path).unwrap_or_default());
        self.token_file = Some(path.to_string());
        self
    }

    pub fn token(mut self, token: &[u8]) -> Options {
        self.token = trim_token(token.to_vec());
        self.token_file = None;
        self
    }

    fn hello_info(&self) -> HelloInfo {
        HelloInfo {
            token: self.token.clone(),
            devices: self.devices.clone(),
            gpus: self.gpus,
            connect_timeout: self.connect_timeout,
        }
    }
}

pub(crate) struct State {
    pub conn: Conn,
    pub server: String,
    pub server_ctx: Option<u64>,
    pub info: HelloInfo,
    pub token_file: Option<String>,
    pub paused: bool,
}

pub(crate) struct Shared {
    st: Mutex<State>,
}

/// A session with a gpu-server. Cloning it shares it; the session ends
/// (goodbye) when the last clone and every object made through it are
/// dropped.
#[derive(Clone)]
pub struct Session {
    pub(crate) sh: Arc<Shared>,
}

impl Session {
    /// A session as the environment says (Options::from_env).
    pub fn from_env() -> Result<Session> {
        Session::connect(&Options::from_env())
    }

    pub fn connect(o: &Options) -> Result<Session> {
        let info = o.hello_info();
        let conn = Conn::open(&o.server, proto::OP_CONNECT, "", &info)?;
        let st = State {
            conn,
            server: o.server.clone(),
            server_ctx: None,
            info,
            token_file: o.token_file.clone(),
            paused: false,
        };
        let s = Session { sh: Arc::new(Shared { st: Mutex::new(st) }) };
        if o.control {
            control::serve(&s);
        }
        Ok(s)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.sh.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs f on the connection (no context needed).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        f(&mut self.lock().conn)
    }

    /// Runs f with context ctx current on the server.
    pub(crate) fn in_ctx<T>(&self, ctx: u64, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut st = self.lock();
        if st.server_ctx != Some(ctx) {
            st.conn.cuCtxSetCurrent(ctx)?;
            st.server_ctx = Some(ctx);
        }
        f(&mut st.conn)
    }

    /// The worker's pid on the server (for logs).
    pub fn worker_pid(&self) -> u64 {
        self.lock().conn.worker_pid
    }

    /// The server the session is on now (after a restore, the new one).
    pub fn server(&self) -> String {
        self.lock().server.clone()
    }

    /// The driver's version, as cuDriverGetVersion gives it.
    pub fn driver_version(&self) -> Result<i32> {
        self.with(|c| c.cuDriverGetVersion())
    }

    /// How many GPUs this session sees.
    pub fn device_count(&self) -> Result<i32> {
        self.with(|c| c.cuDeviceGetCount())
    }

    pub(crate) fn weak(&self) -> std::sync::Weak<Shared> {
        Arc::downgrade(&self.sh)
    }

    pub(crate) fn from_shared(sh: Arc<Shared>) -> Session {
        Session { sh }
    }
}

impl State {
    /// Pauses the session: its worker finishes the device's work and keeps
    /// it under a ticket; the connection closes. Returns the ticket.
    pub fn pause(&mut self) -> Result<String> {
        if self.conn.is_lost() {
            return Err(Error::Lost("the GPU session is lost".into()));
        }
        let r: NameRes = self.conn.call_any(proto::P_detach, &Scalars { v: vec![] })?;
        if r.err != 0 || r.name.is_empty() {
            let why = if r.name.is_empty() { format!("error {}", r.err) } else { r.name };
            return Err(Error::Invalid(format!("cannot pause the GPU session: {}", why)));
        }
        self.conn.close();
        self.paused = true;
        Ok(r.name)
    }

    /// Reattaches the paused session through server to ticket's worker;
    /// on failure the session stays paused (and can resume where it was).
    pub fn resume(&mut self, server: &str, ticket: &str) -> Result<()> {
        let conn = Conn::open(server, proto::OP_REATTACH, ticket, &self.info)?;
        self.conn = conn;
        self.server = server.to_string();
        self.server_ctx = None;
        self.paused = false;
        Ok(())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let st = self.st.get_mut().unwrap_or_else(|e| e.into_inner());
        if !st.conn.is_lost() {
            let _ = st.conn.goodbye(&Scalars { v: vec![] });
        }
        st.conn.close();
    }
}
