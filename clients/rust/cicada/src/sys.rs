//! sys.rs: the few Linux calls that std (as of Rust 1.63) does not offer
//! and the control socket needs: binding an abstract unix socket, and the
//! credentials of a unix peer. They are libc's, which std links anyway;
//! nothing else of C is used.

use std::io;
use std::os::unix::io::{FromRawFd, RawFd};
use std::os::unix::net::UnixListener;

const AF_UNIX: i32 = 1;
const SOCK_STREAM: i32 = 1;
const SOCK_CLOEXEC: i32 = 0o2000000;
const SOL_SOCKET: i32 = 1;
const SO_PEERCRED: i32 = 17;

#[repr(C)]
struct SockaddrUn {
    family: u16,
    path: [u8; 108],
}

#[repr(C)]
#[derive(Default)]
pub struct Ucred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

extern "C" {
    fn socket(domain: i32, kind: i32, protocol: i32) -> i32;
    fn bind(fd: i32, addr: *const SockaddrUn, len: u32) -> i32;
    fn listen(fd: i32, backlog: i32) -> i32;
    fn close(fd: i32) -> i32;
    fn getsockopt(fd: i32, level: i32, name: i32, val: *mut Ucred, len: *mut u32) -> i32;
    fn getuid() -> u32;
}

/// A listening socket at the abstract name "\0<name>".
pub fn listen_abstract(name: &str) -> io::Result<UnixListener> {
    let mut sa = SockaddrUn { family: AF_UNIX as u16, path: [0; 108] };
    let b = name.as_bytes();
    if b.len() + 1 > sa.path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "name too long"));
    }
    sa.path[1..1 + b.len()].copy_from_slice(b);
    let len = (2 + 1 + b.len()) as u32;
    // SAFETY: plain system calls on a descriptor this function owns, with
    // an address that lives across them.
    unsafe {
        let fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        if bind(fd, &sa, len) != 0 || listen(fd, 4) != 0 {
            let e = io::Error::last_os_error();
            close(fd);
            return Err(e);
        }
        Ok(UnixListener::from_raw_fd(fd))
    }
}

/// The credentials of the process at fd's other end.
pub fn peer_cred(fd: RawFd) -> io::Result<Ucred> {
    let mut c = Ucred::default();
    let mut len = std::mem::size_of::<Ucred>() as u32;
    // SAFETY: c and len outlive the call, and len is c's size.
    if unsafe { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &mut c, &mut len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(c)
}

pub fn uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { getuid() }
}
