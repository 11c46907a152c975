//! cicada: a native client of Cicada's gpu-server. A Rust program (or a
//! unikernel, or a sandbox without the Linux driver) uses a remote GPU by
//! speaking Cicada's wire protocol itself, over a unix socket, TCP or TLS,
//! with no libcuda and no C in between.
//!
//! The protocol's types and one stub per procedure are generated from
//! wire/cicada.x and wire/calls.tbl at build time (proto, the Calls
//! trait); the safe API above them is Session, Device, Context,
//! DeviceBuffer, Module, Function, Stream and Event. See docs/rust.md.
//!
//! ```no_run
//! use cicada::*;
//! let s = Session::from_env()?;
//! let ctx = Context::new(&Device::get(&s, 0)?)?;
//! let m = Module::from_ptx(&ctx, &std::fs::read_to_string("k.ptx").unwrap())?;
//! let f = m.function("vec_add")?;
//! let (a, b) = (DeviceBuffer::from_slice(&ctx, &[1f32; 4])?, DeviceBuffer::from_slice(&ctx, &[2f32; 4])?);
//! let c = DeviceBuffer::<f32>::new(&ctx, 4)?;
//! f.launch(LaunchConfig::for_items(4, 128), None, (&a, &b, &c, 4i32))?;
//! assert_eq!(c.to_vec()?, vec![3f32; 4]);
//! # Ok::<(), cicada::Error>(())
//! ```

mod api;
mod conn;
mod control;
mod error;
pub mod hash;
pub mod link;
mod session;
mod sys;
pub mod tls;
pub mod xdr;

/// The protocol, generated from wire/cicada.x, wire/calls.tbl and cuda.h.
#[allow(dead_code, non_upper_case_globals, non_snake_case, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/proto.rs"));
}

pub use api::{
    Context, Device, DeviceBuffer, DeviceCopy, Event, Function, KernelArg, KernelArgs, LaunchConfig, Module, Stream,
};
pub use conn::Conn;
pub use error::{Error, Result};
pub use proto::Calls;
pub use session::{Options, Session};

impl Session {
    /// Runs f on the session's connection, for any procedure of the table
    /// through proto::Calls (the raw protocol: handles are ids).
    pub fn raw<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        self.with(f)
    }
}
