//! xdr.rs: XDR encoding (RFC 4506) of the messages that wire/cicada.x
//! defines, and the ONC RPC call and reply headers around them (RFC
//! 5531). Decoding is defensive: every length is checked against the
//! .x's maximum and against the bytes left before anything is allocated,
//! since a peer's bytes are hostile.

use crate::Error;

/// A message that does not decode (or cannot be encoded within its limits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdrError(pub &'static str);

/// A value that crosses the wire as XDR.
pub trait Xdr: Sized {
    fn put(&self, w: &mut Writer) -> Result<(), XdrError>;
    fn get(r: &mut Reader) -> Result<Self, XdrError>;
}

/// A result struct whose first member is the call's CUresult.
pub trait HasErr {
    fn err(&self) -> i32;
}

/// What the generated stubs (proto::Calls) call through: a connection
/// that sends a procedure's arguments and, for a synchronous one, reads
/// its result.
pub trait Caller {
    /// A synchronous call: its result, or the CUresult it failed with.
    fn call<A: Xdr, R: Xdr + HasErr>(&mut self, proc_: u32, args: &A) -> Result<R, Error>;
    /// A pipelined call (no reply; a failure shows at a later sync call).
    fn send<A: Xdr>(&mut self, proc_: u32, args: &A) -> Result<(), Error>;

    /// A generated call of scalars in and out: nout words back.
    fn scalar_call(&mut self, proc_: u32, ins: Vec<u64>, nout: usize) -> Result<Vec<u64>, Error> {
        let r: crate::proto::ScalarRes = self.call(proc_, &crate::proto::Scalars { v: ins })?;
        if r.v.len() != nout {
            return Err(Error::Protocol(format!(
                "{}: {} results where {} were due",
                crate::proto::proc_name(proc_),
                r.v.len(),
                nout
            )));
        }
        Ok(r.v)
    }
}

#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer { buf: Vec::new() }
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    fn pad(&mut self, len: usize) {
        let n = (4 - len % 4) % 4;
        self.buf.extend_from_slice(&[0u8; 3][..n]);
    }

    pub fn opaque(&mut self, v: &[u8], max: u32) -> Result<(), XdrError> {
        if v.len() > max as usize {
            return Err(XdrError("opaque longer than its maximum"));
        }
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
        self.pad(v.len());
        Ok(())
    }

    pub fn opaque_fixed(&mut self, v: &[u8], n: u32) -> Result<(), XdrError> {
        if v.len() != n as usize {
            return Err(XdrError("fixed opaque of the wrong length"));
        }
        self.buf.extend_from_slice(v);
        self.pad(v.len());
        Ok(())
    }

    pub fn string(&mut self, v: &str, max: u32) -> Result<(), XdrError> {
        self.opaque(v.as_bytes(), max)
    }

    pub fn array<T: Xdr>(&mut self, v: &[T], max: u32) -> Result<(), XdrError> {
        if v.len() > max as usize {
            return Err(XdrError("array longer than its maximum"));
        }
        self.u32(v.len() as u32);
        v.iter().try_for_each(|e| e.put(self))
    }

    pub fn array_fixed<T: Xdr>(&mut self, v: &[T], n: u32) -> Result<(), XdrError> {
        if v.len() != n as usize {
            return Err(XdrError("fixed array of the wrong length"));
        }
        v.iter().try_for_each(|e| e.put(self))
    }
}

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        if n > self.left() {
            return Err(XdrError("message ends too soon"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn skip_pad(&mut self, len: usize) -> Result<(), XdrError> {
        self.take((4 - len % 4) % 4).map(|_| ())
    }

    pub fn opaque(&mut self, max: u32) -> Result<Vec<u8>, XdrError> {
        let n = self.u32()?;
        if n > max {
            return Err(XdrError("opaque longer than its maximum"));
        }
        let v = self.take(n as usize)?.to_vec();
        self.skip_pad(n as usize)?;
        Ok(v)
    }

    pub fn opaque_fixed(&mut self, n: u32) -> Result<Vec<u8>, XdrError> {
        let v = self.take(n as usize)?.to_vec();
        self.skip_pad(n as usize)?;
        Ok(v)
    }

    /// A string; bytes that are not UTF-8 become U+FFFD (a peer's text is
    /// only ever shown or compared).
    pub fn string(&mut self, max: u32) -> Result<String, XdrError> {
        Ok(String::from_utf8_lossy(&self.opaque(max)?).into_owned())
    }

    pub fn array<T: Xdr>(&mut self, max: u32) -> Result<Vec<T>, XdrError> {
        let n = self.u32()?;
        // every element takes at least 4 bytes: a count past what is left lies
        if n > max || n as usize > self.left() / 4 {
            return Err(XdrError("array longer than its maximum or than the message"));
        }
        (0..n).map(|_| T::get(self)).collect()
    }

    pub fn array_fixed<T: Xdr>(&mut self, n: u32) -> Result<Vec<T>, XdrError> {
        if n as usize > self.left() / 4 {
            return Err(XdrError("message ends too soon"));
        }
        (0..n).map(|_| T::get(self)).collect()
    }
}

macro_rules! prim {
    ($t:ty, $n:expr, $put:expr, $get:expr) => {
        impl Xdr for $t {
            fn put(&self, w: &mut Writer) -> Result<(), XdrError> {
                let f: fn(&$t) -> [u8; $n] = $put;
                w.buf.extend_from_slice(&f(self));
                Ok(())
            }
            fn get(r: &mut Reader) -> Result<Self, XdrError> {
                let b = r.take($n)?;
                let mut a = [0u8; $n];
                a.copy_from_slice(b);
                let f: fn([u8; $n]) -> $t = $get;
                Ok(f(a))
            }
        }
    };
}

prim!(u32, 4, |v| v.to_be_bytes(), u32::from_be_bytes);
prim!(i32, 4, |v| v.to_be_bytes(), i32::from_be_bytes);
prim!(u64, 8, |v| v.to_be_bytes(), u64::from_be_bytes);
prim!(i64, 8, |v| v.to_be_bytes(), i64::from_be_bytes);
prim!(f32, 4, |v| v.to_bits().to_be_bytes(), |a| f32::from_bits(u32::from_be_bytes(a)));
prim!(f64, 8, |v| v.to_bits().to_be_bytes(), |a| f64::from_bits(u64::from_be_bytes(a)));

impl Xdr for bool {
    fn put(&self, w: &mut Writer) -> Result<(), XdrError> {
        w.u32(*self as u32);
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self, XdrError> {
        match r.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(XdrError("a bool that is neither 0 nor 1")),
        }
    }
}

// --- ONC RPC messages (wire/message.c) ---------------------------------

const MSG_CALL: u32 = 0;
const MSG_REPLY: u32 = 1;
const RPC_VERSION: u32 = 2;

/// A call's record body: header (no credentials), then the arguments.
pub fn encode_call<A: Xdr>(xid: u32, proc_: u32, args: &A) -> Result<Vec<u8>, XdrError> {
    let mut w = Writer::new();
    for v in [
        xid,
        MSG_CALL,
        RPC_VERSION,
        crate::proto::CICADA_PROG,
        crate::proto::CICADA_VERS,
        proc_,
        0,
        0,
        0,
        0,
    ] {
        w.u32(v);
    }
    args.put(&mut w)?;
    Ok(w.buf)
}

/// Whether a record is a call (a notice from the server: device output)
/// rather than a reply.
pub fn is_call(rec: &[u8]) -> bool {
    rec.len() >= 8 && rec[4..8] == MSG_CALL.to_be_bytes()
}

/// A notice's procedure and a reader at its arguments.
pub fn decode_call(rec: &[u8]) -> Result<(u32, Reader<'_>), XdrError> {
    let mut r = Reader::new(rec);
    let _xid = r.u32()?;
    let (kind, vers, prog, pvers, proc_) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?);
    for _ in 0..2 {
        let _flavor = r.u32()?;
        r.opaque(400)?;
    }
    if kind != MSG_CALL || vers != RPC_VERSION || prog != crate::proto::CICADA_PROG || pvers != crate::proto::CICADA_VERS {
        return Err(XdrError("not a Cicada notice"));
    }
    Ok((proc_, r))
}

/// A reply's result, checked to answer call xid.
pub fn decode_reply<R: Xdr>(rec: &[u8], xid: u32) -> Result<R, XdrError> {
    let mut r = Reader::new(rec);
    let w: Vec<u32> = (0..6).map(|_| r.u32()).collect::<Result<_, _>>()?;
    if w[0] != xid || w[1] != MSG_REPLY || w[2] != 0 {
        return Err(XdrError("malformed reply"));
    }
    if w[5] != 0 {
        return Err(XdrError("the server refused the call (accept status not SUCCESS)"));
    }
    R::get(&mut r)
}
