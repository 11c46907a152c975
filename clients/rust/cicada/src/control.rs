//! control.rs: the process's control socket, so that CRIU's plugin (and
//! cicadactl through it) can checkpoint a Rust program like a C one. The
//! protocol is wire/control.c's, served as interposer/control.c serves
//! it, on the abstract unix socket "\0cicada-ctl.<pid>" (a tagged name
//! if that one is taken), answering only root or the process's own user:
//!
//!   PAUSE   -> PAUSED <ticket> <server> <token-hex|-> <token-file|->
//!              | ERROR <reason>; then, on the same connection,
//!   RESUME <ticket> <server> [<token-hex>] -> RESUMED | ERROR <reason>
//!   PRECOPY -> ERROR (a migration's pre-copy needs the C client)
//!
//! While paused the thread holds the session's lock, so every call of
//! the program waits; the socket is closed meanwhile (a checkpoint
//! carries none) and made again at the resume. A pause ends with RESUME
//! or with the end of the connection: that resumes where it was. Only a
//! process's first session is served (the name is per process).

use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
use std::time::Duration;

use crate::session::{Session, Shared, State};
use crate::sys;

const LINE_MAX: usize = 2048;
static STARTED: AtomicBool = AtomicBool::new(false);

fn random_tag() -> u32 {
    let mut b = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut b);
    }
    u32::from_ne_bytes(b) | 1
}

fn listen() -> std::io::Result<UnixListener> {
    let pid = std::process::id();
    let mut r = sys::listen_abstract(&format!("cicada-ctl.{}", pid));
    for _ in 0..8 {
        match &r {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                r = sys::listen_abstract(&format!("cicada-ctl.{}.{:08x}", pid, random_tag()))
            }
            _ => break,
        }
    }
    r
}

/// Starts the control thread for session s (the process's first).
pub(crate) fn serve(s: &Session) {
    if STARTED.swap(true, Ordering::SeqCst) {
        return;
    }
    let l = match listen() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cicada: no control socket ({}): this process cannot be checkpointed", e);
            return;
        }
    };
    let weak = s.weak();
    let _ = std::thread::Builder::new().name("cicada-control".into()).spawn(move || run(l, weak));
}

fn run(l: UnixListener, weak: Weak<Shared>) {
    let mut l = Some(l);
    loop {
        let fd = match l.as_ref() {
            Some(listener) => listener.accept(),
            None => {
                l = listen_again();
                continue;
            }
        };
        let fd = match fd {
            Ok((fd, _)) => fd,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("cicada: control socket: {}; checkpoints are off", e);
                return;
            }
        };
        if !allowed(&fd) {
            continue;
        }
        match weak.upgrade() {
            Some(sh) => serve_one(fd, Session::from_shared(sh), &mut l),
            None => return, // the session ended: nothing to pause any more
        }
    }
}

/// The control socket again after a pause, tried each second until it is.
fn listen_again() -> Option<UnixListener> {
    loop {
        match listen() {
            Ok(l) => return Some(l),
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

fn allowed(fd: &UnixStream) -> bool {
    match sys::peer_cred(fd.as_raw_fd()) {
        Ok(c) => c.uid == 0 || c.uid == sys::uid(),
        Err(_) => false,
    }
}

/// One line, at most LINE_MAX bytes, without its newline; None at the end.
fn read_line(fd: &mut UnixStream) -> Option<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match fd.read(&mut b) {
            Ok(0) => return None,
            Ok(_) if b[0] == b'\n' => return String::from_utf8(line).ok(),
            Ok(_) if line.len() < LINE_MAX => line.push(b[0]),
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
}

fn say(fd: &mut UnixStream, line: &str) {
    let _ = fd.write_all(format!("{}\n", line).as_bytes());
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{:02x}", x)).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() / 2 > crate::proto::CICADA_TOKEN_MAX as usize {
        return None;
    }
    (0..s.len() / 2).map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}

fn word_ok(s: &str) -> bool {
    !s.is_empty() && !s.contains(|c| c == ' ' || c == '\n' || c == '\r')
}

fn serve_one(mut fd: UnixStream, s: Session, l: &mut Option<UnixListener>) {
    let _ = fd.set_read_timeout(Some(Duration::from_secs(30)));
    let line = match read_line(&mut fd) {
        Some(l) => l,
        None => return,
    };
    if line.starts_with("PRECOPY ") {
        say(&mut fd, "ERROR a migration's pre-copy is not served by the Rust client (move it whole, or stopped)");
        return;
    }
    if line != "PAUSE" {
        say(&mut fd, "ERROR unknown request");
        return;
    }
    let mut st = s.lock();
    let ticket = match st.pause() {
        Ok(t) => t,
        Err(e) => {
            say(&mut fd, &format!("ERROR {}", e));
            return;
        }
    };
    let server = st.server.clone();
    let token = if st.info.token.is_empty() { "-".to_string() } else { hex(&st.info.token) };
    let file = st
        .token_file
        .clone()
        .filter(|f| f.starts_with('/') && !f.contains(' ') && f.len() < 420)
        .unwrap_or_else(|| "-".into());
    *l = None; // closed while paused: a checkpoint carries none
    if word_ok(&ticket) && word_ok(&server) {
        say(&mut fd, &format!("PAUSED {} {} {} {}", ticket, server, token, file));
    } else {
        say(&mut fd, "ERROR the session's address does not fit a control line");
    }
    paused(&mut fd, &mut st, &ticket, &server);
}

/// Paused: waits for RESUME (or the connection's end), then resumes; a
/// RESUME elsewhere that fails resumes where the session was.
fn paused(fd: &mut UnixStream, st: &mut State, ticket: &str, server: &str) {
    let _ = fd.set_read_timeout(None);
    let own_token = st.info.token.clone();
    let line = read_line(fd);
    let words: Vec<&str> = line.as_deref().unwrap_or("").split(' ').filter(|w| !w.is_empty()).collect();
    let mut to: Option<(String, String)> = None;
    if (words.len() == 3 || words.len() == 4) && words[0] == "RESUME" {
        if words.len() == 4 {
            match unhex(words[3]) {
                Some(t) => st.info.token = t,
                None => {
                    say(fd, "ERROR malformed token");
                    if let Err(e) = st.resume(server, ticket) {
                        eprintln!("cicada: cannot resume the GPU session at {}: {}", server, e);
                    }
                    return;
                }
            }
        }
        to = Some((words[2].to_string(), words[1].to_string()));
    }
    let asked = to.is_some();
    let (srv, tk) = to.unwrap_or_else(|| (server.to_string(), ticket.to_string()));
    match st.resume(&srv, &tk) {
        Ok(()) => {
            if asked {
                say(fd, "RESUMED");
            }
        }
        Err(e) => {
            eprintln!("cicada: cannot reattach the GPU session at {}: {}", srv, e);
            if !asked {
                return;
            }
            st.info.token = own_token;
            match st.resume(server, ticket) {
                Ok(()) => say(fd, "ERROR cannot reattach; resumed where it was"),
                Err(_) => say(fd, "ERROR cannot reattach, nor resume where it was"),
            }
        }
    }
}
