//! error.rs: what a call can fail with. Every error carries the CUresult
//! the C driver API would have returned, and its name from cuda.h.

use std::fmt;

use crate::proto;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The server (the driver behind it) answered this CUresult.
    Cuda(i32),
    /// The server could not be reached, or the hello failed.
    Connect(String),
    /// The server refused the session: its CUresult and reason.
    Refused(i32, String),
    /// The connection was lost (the server died, the network broke); the
    /// session is over and every later call fails at once with this.
    Lost(String),
    /// The server sent what the protocol does not allow.
    Protocol(String),
    /// A call refused here, before anything was sent.
    Invalid(String),
    /// Device code that did not build: the CUresult and the JIT's log.
    Build(i32, String),
}

impl Error {
    /// The CUresult this error stands for.
    pub fn code(&self) -> i32 {
        match self {
            Error::Cuda(c) | Error::Refused(c, _) | Error::Build(c, _) => *c,
            Error::Connect(_) => proto::CUDA_ERROR_NO_DEVICE,
            Error::Lost(_) | Error::Protocol(_) => proto::CUDA_ERROR_DEVICE_UNAVAILABLE,
            Error::Invalid(_) => proto::CUDA_ERROR_INVALID_VALUE,
        }
    }

    /// What happened, without the CUresult's name.
    pub fn detail(&self) -> String {
        match self {
            Error::Cuda(_) => self.name().to_string(),
            Error::Build(_, s) | Error::Refused(_, s) | Error::Connect(s) | Error::Lost(s) => s.clone(),
            Error::Protocol(s) | Error::Invalid(s) => s.clone(),
        }
    }

    /// The CUresult's name (cuda.h), e.g. "CUDA_ERROR_INVALID_VALUE".
    pub fn name(&self) -> &'static str {
        proto::error_name(self.code()).unwrap_or("CUDA_ERROR_UNKNOWN")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Error::Cuda(_) => write!(f, "{} ({})", self.name(), self.code()),
            Error::Build(_, log) => write!(f, "{}: {}", self.name(), log),
            Error::Refused(_, why) => write!(f, "{}: the gpu-server refused the session: {}", self.name(), why),
            Error::Connect(why) | Error::Lost(why) | Error::Protocol(why) | Error::Invalid(why) => {
                write!(f, "{}: {}", self.name(), why)
            }
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
