//! conn.rs: one session's connection: the hello (wire/cicada.x's
//! hello_args, the token proved for the server's challenge), then calls
//! in order on it. Pipelined calls (result void) go out without waiting;
//! a synchronous call's reply may follow notices (device printf output),
//! which are written where the driver would write them. Once the
//! connection breaks, every call fails at once with Error::Lost.

use std::io::Write;
use std::time::Duration;

use crate::link::{self, Addr, Stream};
use crate::proto::{self, HelloArgs, HelloRes, NoticeOutput};
use crate::xdr::{self, Caller, HasErr, Xdr};
use crate::Error;

/// What a hello says besides its op: the environment's part.
#[derive(Clone, Default)]
pub struct HelloInfo {
    pub token: Vec<u8>,
    pub devices: String,
    pub gpus: u32,
    pub connect_timeout: Duration,
}

pub struct Conn {
    stream: Option<Box<dyn Stream>>,
    xid: u32,
    pub addr_text: String,
    pub worker_pid: u64,
    lost: Option<String>,
}

fn hostname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let h: String = h.trim().chars().take(63).collect();
    if h.is_empty() {
        "rust-client".into()
    } else {
        h
    }
}

impl Conn {
    /// Dials addr_text and says hello with op (and ticket, to reattach).
    pub fn open(addr_text: &str, op: proto::HelloOp, ticket: &str, info: &HelloInfo) -> Result<Conn, Error> {
        let addr = Addr::parse(addr_text)?;
        let mut s = link::dial(&addr, info.connect_timeout)?;
        let nonce = link::recv_challenge(&mut *s, info.connect_timeout)
            .map_err(|e| Error::Connect(format!("gpu-server at {}: {}", addr_text, e.detail())))?;
        let h = HelloArgs {
            proto_version: proto::CICADA_PROTO_VERSION,
            token: link::token_proof(&info.token, &nonce),
            pid: std::process::id() as u64,
            host: hostname(),
            op,
            ticket: ticket.to_string(),
            devices: info.devices.clone(),
            gpus: info.gpus,
            ..Default::default()
        };
        let mut c = Conn { stream: Some(s), xid: 0, addr_text: addr_text.to_string(), worker_pid: 0, lost: None };
        // A server that refuses at once may close early: its answer still says why.
        let sent = c.send_only(proto::P_hello, &h);
        let r: HelloRes = match c.reply(proto::P_hello) {
            Ok(r) => r,
            Err(_) if sent.is_err() => {
                return Err(Error::Connect(format!("gpu-server at {} closed the connection during hello", addr_text)))
            }
            Err(Error::Lost(why)) if why.contains("timed out") || why.contains("temporarily") => {
                return Err(Error::Connect(format!(
                    "gpu-server at {} did not answer the hello within {} s (CICADA_CONNECT_TIMEOUT)",
                    addr_text,
                    info.connect_timeout.as_secs()
                )))
            }
            Err(e) => return Err(Error::Connect(format!("gpu-server at {}: {}", addr_text, e.detail()))),
        };
        if r.err != 0 {
            return Err(Error::Refused(r.err, r.message));
        }
        if let Some(s) = c.stream.as_ref() {
            let _ = s.set_read_timeout(None);
        }
        c.worker_pid = r.worker_pid;
        Ok(c)
    }

    fn lose(&mut self, why: String) -> Error {
        if let Some(s) = self.stream.take() {
            s.shutdown();
        }
        let why = format!("lost the connection to gpu-server at {}: {}", self.addr_text, why);
        self.lost = Some(why.clone());
        Error::Lost(why)
    }

    fn send_only<A: Xdr>(&mut self, proc_: u32, args: &A) -> Result<(), Error> {
        if let Some(why) = &self.lost {
            return Err(Error::Lost(why.clone()));
        }
        self.xid = self.xid.wrapping_add(1);
        let body = xdr::encode_call(self.xid, proc_, args)
            .map_err(|e| Error::Invalid(format!("{}: {}", proto::proc_name(proc_), e.0)))?;
        let s = self.stream.as_mut().expect("a live connection has its stream");
        if let Err(e) = link::send_record(&mut **s, &body) {
            return Err(self.lose(format!("write failed: {}", e)));
        }
        Ok(())
    }

    fn reply<R: Xdr>(&mut self, proc_: u32) -> Result<R, Error> {
        loop {
            let s = match self.stream.as_mut() {
                Some(s) => s,
                None => return Err(Error::Lost(self.lost.clone().unwrap_or_default())),
            };
            let rec = match link::recv_record(&mut **s, link::MAX_RECORD) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Err(self.lose("the server closed the connection".into()))
                }
                Err(e) => return Err(self.lose(e.to_string())),
            };
            if xdr::is_call(&rec) {
                if let Err(e) = take_notice(&rec) {
                    return Err(self.lose(format!("malformed notice: {}", e.0)));
                }
                continue;
            }
            return xdr::decode_reply(&rec, self.xid)
                .map_err(|e| self.lose(format!("{}: {}", proto::proc_name(proc_), e.0)));
        }
    }

    /// Ends the connection (after a goodbye, or for a pause).
    pub fn close(&mut self) {
        if let Some(s) = self.stream.take() {
            s.shutdown();
        }
        self.lost = Some("the session was closed".into());
    }

    pub fn is_lost(&self) -> bool {
        self.lost.is_some()
    }
}

/// A notice: device output for the program's stdout or stderr.
fn take_notice(rec: &[u8]) -> Result<(), xdr::XdrError> {
    let (proc_, mut r) = xdr::decode_call(rec)?;
    let n = NoticeOutput::get(&mut r)?;
    match proc_ {
        proto::CICADA_NOTICE_OUTPUT => {
            let mut o = std::io::stdout();
            let _ = o.write_all(&n.data);
            let _ = o.flush();
        }
        proto::CICADA_NOTICE_ERROR_OUTPUT => {
            let _ = std::io::stderr().write_all(&n.data);
        }
        _ => return Err(xdr::XdrError("unknown notice")),
    }
    Ok(())
}

impl Conn {
    /// A synchronous call whose result comes back whatever its err (a
    /// failed module load's JIT log, a refused pause's reason).
    pub fn call_any<A: Xdr, R: Xdr>(&mut self, proc_: u32, args: &A) -> Result<R, Error> {
        self.send_only(proc_, args)?;
        self.reply(proc_)
    }
}

impl Caller for Conn {
    fn call<A: Xdr, R: Xdr + HasErr>(&mut self, proc_: u32, args: &A) -> Result<R, Error> {
        let r: R = self.call_any(proc_, args)?;
        match r.err() {
            0 => Ok(r),
            e => Err(Error::Cuda(e)),
        }
    }

    fn send<A: Xdr>(&mut self, proc_: u32, args: &A) -> Result<(), Error> {
        self.send_only(proc_, args)
    }
}
