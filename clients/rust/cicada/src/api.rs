//! api.rs: the safe API over the generated calls: Device, Context,
//! DeviceBuffer<T>, Module, Function, Stream and Event. Each object keeps
//! what it needs alive (a buffer its context, a function its module) and
//! releases its server-side handle when dropped. Handles are the ids the
//! worker gave them; they stay valid across a checkpoint and restore.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::proto::{self, cu, Calls, DtohArgs, HandleNameArgs, HtodArgs, ImageHash, JitOption};
use crate::proto::{LaunchArgs, ModuleLoadArgs, ModuleLoadRes, NameRes, ParamInfoRes, Scalars};
use crate::session::Session;
use crate::{Error, Result};

const CHUNK: usize = proto::CICADA_CHUNK_MAX as usize;

/// A GPU of the session, by the ordinal the session sees it as.
pub struct Device {
    s: Session,
    ordinal: i32,
}

impl Device {
    pub fn get(s: &Session, ordinal: i32) -> Result<Device> {
        let ordinal = s.with(|c| c.cuDeviceGet(ordinal))?;
        Ok(Device { s: s.clone(), ordinal })
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    pub fn name(&self) -> Result<String> {
        let r: NameRes = self.s.with(|c| c.device_get_name(&Scalars { v: vec![self.ordinal as u64] }))?;
        Ok(r.name)
    }

    pub fn total_memory(&self) -> Result<u64> {
        self.s.with(|c| c.cuDeviceTotalMem_v2(self.ordinal))
    }

    /// A CU_DEVICE_ATTRIBUTE_* (proto::cu) of the device.
    pub fn attribute(&self, attr: i64) -> Result<i32> {
        self.s.with(|c| c.cuDeviceGetAttribute(attr as u32, self.ordinal))
    }

    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        Ok((
            self.attribute(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }
}

struct CtxInner {
    s: Session,
    id: u64,
    dev: i32,
}

impl Drop for CtxInner {
    fn drop(&mut self) {
        let _ = self.s.with(|c| c.cuDevicePrimaryCtxRelease_v2(self.dev));
    }
}

/// A device's primary context (retained; released when the last user of
/// it is dropped).
#[derive(Clone)]
pub struct Context {
    inner: Arc<CtxInner>,
}

impl Context {
    pub fn new(dev: &Device) -> Result<Context> {
        let id = dev.s.with(|c| c.cuDevicePrimaryCtxRetain(dev.ordinal))?;
        Ok(Context { inner: Arc::new(CtxInner { s: dev.s.clone(), id, dev: dev.ordinal }) })
    }

    fn call<T>(&self, f: impl FnOnce(&mut crate::Conn) -> Result<T>) -> Result<T> {
        self.inner.s.in_ctx(self.inner.id, f)
    }

    /// Waits for all the context's work; reports a failed launch's error.
    pub fn synchronize(&self) -> Result<()> {
        self.call(|c| c.cuCtxSynchronize())
    }

    /// Free and total device memory, as cuMemGetInfo says (a quota, if the
    /// server set one).
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        self.call(|c| c.cuMemGetInfo_v2())
    }

    pub fn session(&self) -> &Session {
        &self.inner.s
    }
}

/// Plain data that may be copied to and from the device as its bytes.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value, and it
/// must have no padding.
pub unsafe trait DeviceCopy: Copy + Send + Sync + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(unsafe impl DeviceCopy for $t {})* };
}
device_copy!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

fn as_bytes<T: DeviceCopy>(v: &[T]) -> &[u8] {
    // SAFETY: DeviceCopy types are plain bytes without padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: DeviceCopy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above; every bit pattern is a valid T.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// len elements of T in device memory.
pub struct DeviceBuffer<T: DeviceCopy> {
    ctx: Context,
    ptr: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Uninitialised (as cuMemAlloc leaves it) room for len elements.
    pub fn new(ctx: &Context, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::Invalid("allocation size overflows".into()))?;
        let ptr = ctx.call(|c| c.cuMemAlloc_v2(bytes as u64))?;
        Ok(DeviceBuffer { ctx: ctx.clone(), ptr, len, _t: PhantomData })
    }

    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<DeviceBuffer<T>> {
        let b = DeviceBuffer::new(ctx, data.len())?;
        b.copy_from(data)?;
        Ok(b)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address (for kernels that take it as a number).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    fn range(&self, at: usize, n: usize) -> Result<u64> {
        match at.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.ptr + (at * std::mem::size_of::<T>()) as u64),
            _ => Err(Error::Invalid(format!(
                "copy of {} elements at {} is out of a buffer of {}",
                n, at, self.len
            ))),
        }
    }

    /// Host to device: data into the whole buffer (same length).
    pub fn copy_from(&self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::Invalid(format!("{} elements into a buffer of {}", data.len(), self.len)));
        }
        self.write_at(0, data)
    }

    /// Host to device: data at element offset at.
    pub fn write_at(&self, at: usize, data: &[T]) -> Result<()> {
        let dst = self.range(at, data.len())?;
        self.ctx.call(|c| {
            for (i, chunk) in as_bytes(data).chunks(CHUNK).enumerate() {
                let a = HtodArgs { dst: dst + (i * CHUNK) as u64, data: chunk.to_vec(), ..Default::default() };
                c.memcpy_htod(&a)?;
            }
            Ok(())
        })
    }

    /// Device to host: the whole buffer into out (same length).
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::Invalid(format!("a buffer of {} into {} elements", self.len, out.len())));
        }
        self.read_at(0, out)
    }

    /// Device to host: out.len() elements from element offset at.
    pub fn read_at(&self, at: usize, out: &mut [T]) -> Result<()> {
        let src = self.range(at, out.len())?;
        self.ctx.call(|c| {
            for (i, chunk) in as_bytes_mut(out).chunks_mut(CHUNK).enumerate() {
                let a = DtohArgs { src: src + (i * CHUNK) as u64, size: chunk.len() as u64, ..Default::default() };
                let r = c.memcpy_dtoh(&a)?;
                if r.data.len() != chunk.len() {
                    return Err(Error::Protocol(format!("{} bytes back for {}", r.data.len(), chunk.len())));
                }
                chunk.copy_from_slice(&r.data);
            }
            Ok(())
        })
    }

    pub fn to_vec(&self) -> Result<Vec<T>> {
        // SAFETY: DeviceCopy types are valid as zeroed bytes.
        let mut v: Vec<T> = vec![unsafe { std::mem::zeroed() }; self.len];
        self.copy_to(&mut v)?;
        Ok(v)
    }

    /// Sets every byte to value.
    pub fn memset(&self, value: u8) -> Result<()> {
        let n = (self.len * std::mem::size_of::<T>()) as u64;
        self.ctx.call(|c| c.cuMemsetD8_v2(self.ptr, value, n))
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let _ = self.ctx.call(|c| c.cuMemFree_v2(self.ptr));
    }
}

// --- modules, functions, launches ---------------------------------------

const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// The image as the driver takes it: PTX ends in a NUL, a fatbin is cut
/// to the size its header gives; a cubin (ELF) is sent as it is.
fn image_of(bytes: &[u8]) -> Result<Vec<u8>> {
    if bytes.len() >= 16 && u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == FATBIN_MAGIC {
        let hsize = u16::from_le_bytes([bytes[6], bytes[7]]) as u64;
        let mut f = [0u8; 8];
        f.copy_from_slice(&bytes[8..16]);
        let size = hsize.saturating_add(u64::from_le_bytes(f));
        if size > bytes.len() as u64 {
            return Err(Error::Cuda(proto::CUDA_ERROR_INVALID_IMAGE));
        }
        return Ok(bytes[..size as usize].to_vec());
    }
    if bytes.starts_with(b"\x7fELF") {
        return Ok(bytes.to_vec());
    }
    match bytes.first() {
        Some(b) if b.is_ascii_graphic() || b.is_ascii_whitespace() => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let mut v = bytes[..end].to_vec();
            v.push(0);
            Ok(v)
        }
        _ => Err(Error::Cuda(proto::CUDA_ERROR_INVALID_IMAGE)),
    }
}

struct ModInner {
    ctx: Context,
    id: u64,
}

impl Drop for ModInner {
    fn drop(&mut self) {
        let _ = self.ctx.call(|c| c.cuModuleUnload(self.id));
    }
}

/// Loaded device code.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModInner>,
}

/// What the JIT said about a failed load (CUDA_ERROR_INVALID_PTX, ...).
fn load_error(r: &ModuleLoadRes) -> Error {
    let log = String::from_utf8_lossy(&r.logs.error);
    let log = log.trim_end_matches('\0').trim();
    if log.is_empty() {
        Error::Cuda(r.err)
    } else {
        Error::Build(r.err, log.to_string())
    }
}

impl Module {
    /// Loads PTX text (JIT-compiled by the server's driver).
    pub fn from_ptx(ctx: &Context, ptx: &str) -> Result<Module> {
        Module::from_bytes(ctx, ptx.as_bytes())
    }

    /// Loads PTX, a cubin or a fatbin. The image crosses the wire once:
    /// its hash first, the bytes only if the server's cache lacks it.
    pub fn from_bytes(ctx: &Context, bytes: &[u8]) -> Result<Module> {
        let image = image_of(bytes)?;
        if image.len() > proto::CICADA_IMAGE_MAX as usize {
            return Err(Error::Cuda(proto::CUDA_ERROR_INVALID_IMAGE));
        }
        let (lo, hi) = crate::hash::xxh3_128(&image);
        let mut a = ModuleLoadArgs {
            hash: ImageHash { lo, hi },
            options: vec![JitOption { option: cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES as u32, value: 16384 }],
            ..Default::default()
        };
        let id = ctx.call(|c| {
            let r: ModuleLoadRes = c.call_any(proto::P_module_load, &a)?;
            if r.err != proto::CUDA_ERROR_NOT_FOUND {
                return if r.err == 0 { Ok(r.id) } else { Err(load_error(&r)) };
            }
            a.image = image;
            let r: ModuleLoadRes = c.call_any(proto::P_module_load, &a)?;
            if r.err == 0 {
                Ok(r.id)
            } else {
                Err(load_error(&r))
            }
        })?;
        Ok(Module { inner: Arc::new(ModInner { ctx: ctx.clone(), id }) })
    }

    pub fn function(&self, name: &str) -> Result<Function> {
        if name.len() >= proto::CICADA_SYMBOL_MAX as usize {
            return Err(Error::Cuda(proto::CUDA_ERROR_NOT_FOUND));
        }
        let a = HandleNameArgs { handle: self.inner.id, name: name.to_string() };
        let (id, layout) = self.inner.ctx.call(|c| {
            let r = c.module_get_function(&a)?;
            let id = *r.v.first().ok_or_else(|| Error::Protocol("no function id".into()))?;
            let l: ParamInfoRes = c.func_get_param_info(&Scalars { v: vec![id] })?;
            if l.offsets.len() != l.sizes.len() {
                return Err(Error::Protocol("malformed parameter layout".into()));
            }
            Ok((id, l))
        })?;
        Ok(Function { module: self.clone(), id, name: name.to_string(), offsets: layout.offsets, sizes: layout.sizes })
    }
}

/// A kernel of a module, with its parameters' layout (asked of the
/// server once: each launch is checked against it and packed by it).
pub struct Function {
    module: Module,
    id: u64,
    name: String,
    offsets: Vec<u32>,
    sizes: Vec<u32>,
}

/// One kernel argument: its bytes, as the kernel takes it.
pub trait KernelArg {
    fn arg_bytes(&self) -> Vec<u8>;
}

macro_rules! kernel_arg {
    ($($t:ty),*) => { $(impl KernelArg for $t {
        fn arg_bytes(&self) -> Vec<u8> { self.to_le_bytes().to_vec() }
    })* };
}
kernel_arg!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl<T: DeviceCopy> KernelArg for &DeviceBuffer<T> {
    fn arg_bytes(&self) -> Vec<u8> {
        self.ptr.to_le_bytes().to_vec()
    }
}

impl<T: DeviceCopy> KernelArg for &mut DeviceBuffer<T> {
    fn arg_bytes(&self) -> Vec<u8> {
        self.ptr.to_le_bytes().to_vec()
    }
}

/// A kernel's arguments: a tuple of KernelArgs, in the kernel's order.
pub trait KernelArgs {
    fn each(&self) -> Vec<Vec<u8>>;
}

macro_rules! kernel_args {
    ($($n:ident),*) => {
        #[allow(non_snake_case)]
        impl<$($n: KernelArg),*> KernelArgs for ($($n,)*) {
            fn each(&self) -> Vec<Vec<u8>> {
                let ($($n,)*) = self;
                vec![$($n.arg_bytes()),*]
            }
        }
    };
}
impl KernelArgs for () {
    fn each(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }
}
kernel_args!(A);
kernel_args!(A, B);
kernel_args!(A, B, C);
kernel_args!(A, B, C, D);
kernel_args!(A, B, C, D, E);
kernel_args!(A, B, C, D, E, F);
kernel_args!(A, B, C, D, E, F, G);
kernel_args!(A, B, C, D, E, F, G, H);
kernel_args!(A, B, C, D, E, F, G, H, I);
kernel_args!(A, B, C, D, E, F, G, H, I, J);
kernel_args!(A, B, C, D, E, F, G, H, I, J, K);
kernel_args!(A, B, C, D, E, F, G, H, I, J, K, L);

/// A launch's shape.
#[derive(Clone, Copy, Debug)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_mem: u32,
}

impl LaunchConfig {
    /// One-dimensional: enough blocks of `block` threads for n items.
    pub fn for_items(n: u32, block: u32) -> LaunchConfig {
        LaunchConfig { grid: ((n + block - 1) / block, 1, 1), block: (block, 1, 1), shared_mem: 0 }
    }
}

impl Function {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many parameters the kernel takes.
    pub fn param_count(&self) -> usize {
        self.sizes.len()
    }

    /// Packs args at the kernel's offsets, each the size the kernel says.
    fn pack(&self, args: &dyn KernelArgs) -> Result<Vec<u8>> {
        let each = args.each();
        if each.len() != self.sizes.len() {
            return Err(Error::Invalid(format!(
                "kernel {} takes {} parameters, {} given",
                self.name,
                self.sizes.len(),
                each.len()
            )));
        }
        let mut buf = Vec::new();
        for (i, (b, (&off, &size))) in each.iter().zip(self.offsets.iter().zip(self.sizes.iter())).enumerate() {
            if b.len() != size as usize {
                return Err(Error::Invalid(format!(
                    "kernel {}: parameter {} takes {} bytes, {} given",
                    self.name, i, size, b.len()
                )));
            }
            let end = off as usize + size as usize;
            if end > proto::CICADA_PARAMS_MAX as usize {
                return Err(Error::Invalid(format!("kernel {}: parameter {} is past the parameter space", self.name, i)));
            }
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[off as usize..end].copy_from_slice(b);
        }
        Ok(buf)
    }

    /// Launches the kernel (pipelined: a failure shows at the next
    /// synchronisation), on stream or the default one.
    pub fn launch<A: KernelArgs>(&self, cfg: LaunchConfig, stream: Option<&Stream>, args: A) -> Result<()> {
        let params = self.pack(&args)?;
        let a = LaunchArgs {
            func: self.id,
            grid: vec![cfg.grid.0, cfg.grid.1, cfg.grid.2],
            block: vec![cfg.block.0, cfg.block.1, cfg.block.2],
            shared_mem: cfg.shared_mem,
            stream: stream.map(|s| s.id).unwrap_or(0),
            params,
            attrs: vec![],
        };
        self.module.inner.ctx.call(|c| c.launch_kernel(&a))
    }
}

// --- streams and events ---------------------------------------------------

/// A stream of the context.
pub struct Stream {
    ctx: Context,
    id: u64,
}

impl Stream {
    pub fn new(ctx: &Context) -> Result<Stream> {
        let id = ctx.call(|c| c.cuStreamCreate(cu::CU_STREAM_NON_BLOCKING as u32))?;
        Ok(Stream { ctx: ctx.clone(), id })
    }

    pub fn synchronize(&self) -> Result<()> {
        self.ctx.call(|c| c.cuStreamSynchronize(self.id))
    }

    /// Host to device, ordered on the stream (the bytes travel with the call).
    pub fn write<T: DeviceCopy>(&self, dst: &DeviceBuffer<T>, data: &[T]) -> Result<()> {
        let ptr = dst.range(0, data.len())?;
        self.ctx.call(|c| {
            for (i, chunk) in as_bytes(data).chunks(CHUNK).enumerate() {
                let a = HtodArgs { dst: ptr + (i * CHUNK) as u64, stream: self.id, r#async: 1, data: chunk.to_vec() };
                c.memcpy_htod_async(&a)?;
            }
            Ok(())
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.ctx.call(|c| c.cuStreamDestroy_v2(self.id));
    }
}

/// An event, for ordering and timing.
pub struct Event {
    ctx: Context,
    id: u64,
}

impl Event {
    pub fn new(ctx: &Context) -> Result<Event> {
        let id = ctx.call(|c| c.cuEventCreate(cu::CU_EVENT_DEFAULT as u32))?;
        Ok(Event { ctx: ctx.clone(), id })
    }

    /// Records the event on stream (or the default stream).
    pub fn record(&self, stream: Option<&Stream>) -> Result<()> {
        self.ctx.call(|c| c.cuEventRecord(self.id, stream.map(|s| s.id).unwrap_or(0)))
    }

    pub fn synchronize(&self) -> Result<()> {
        self.ctx.call(|c| c.cuEventSynchronize(self.id))
    }

    /// Milliseconds from start to this event (both recorded and done).
    pub fn elapsed_since(&self, start: &Event) -> Result<f32> {
        self.ctx.call(|c| c.cuEventElapsedTime_v2(start.id, self.id))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.call(|c| c.cuEventDestroy_v2(self.id));
    }
}
