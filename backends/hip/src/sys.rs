//! The only `unsafe` in the HIP backend: thin, checked wrappers over
//! hip-runtime-sys (HIP runtime) and hipRTC, whose entry points the -sys
//! crate does not bind and which are declared here (they live in the same
//! libamdhip64). Every call returns a `Result` whose error names the HIP
//! call; every handle is an owning type whose `Drop` releases it. The layout
//! mirrors the CUDA backend's `sys.rs`.
//!
//! HIP has no contexts to make current: a device is selected per thread with
//! `hipSetDevice`, which the backend calls at the top of every seam call.

use hip_runtime_sys as hip;
use seam::{ErrorKind, Params};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

fn error_name(r: hip::hipError_t) -> String {
    // SAFETY: hipGetErrorName returns a pointer to a static NUL-terminated
    // string for every code (an "unknown" string for codes it does not know).
    let name = unsafe { hip::hipGetErrorName(r) };
    if name.is_null() {
        format!("{r:?}")
    } else {
        // SAFETY: non-null, static, NUL-terminated (above).
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }
}

fn describe(r: hip::hipError_t) -> String {
    // SAFETY: as error_name: a static string or null.
    let text = unsafe { hip::hipGetErrorString(r) };
    let name = error_name(r);
    if text.is_null() {
        name
    } else {
        // SAFETY: non-null, static, NUL-terminated.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{name}: {text}")
    }
}

fn check(call: &'static str, r: hip::hipError_t) -> Result<(), ErrorKind> {
    if r == hip::hipError_t::hipSuccess {
        Ok(())
    } else {
        Err(ErrorKind::driver(call, describe(r)))
    }
}

// ----- runtime and devices -----

/// `hipRuntimeGetVersion` (major·10⁷ + minor·10⁵ + build).
pub fn runtime_version() -> Result<i32, ErrorKind> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check("hipRuntimeGetVersion", unsafe {
        hip::hipRuntimeGetVersion(&mut v)
    })?;
    Ok(v)
}

/// `hipDriverGetVersion`.
pub fn driver_version() -> Result<i32, ErrorKind> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check("hipDriverGetVersion", unsafe {
        hip::hipDriverGetVersion(&mut v)
    })?;
    Ok(v)
}

/// Number of HIP devices; `Err((error name, text))` as the runtime said it
/// (no device is `hipErrorNoDevice`, not zero, on ROCm).
pub fn device_count() -> Result<usize, (String, ErrorKind)> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let r = unsafe { hip::hipGetDeviceCount(&mut n) };
    match check("hipGetDeviceCount", r) {
        Ok(()) => Ok(n.max(0) as usize),
        Err(e) => Err((error_name(r), e)),
    }
}

/// Select the device for the calling thread.
pub fn set_device(ordinal: usize) -> Result<(), ErrorKind> {
    let id = c_int::try_from(ordinal).map_err(|_| {
        ErrorKind::driver("hipSetDevice", format!("ordinal {ordinal} out of range"))
    })?;
    // SAFETY: takes an int; an invalid ordinal is reported as an error.
    check("hipSetDevice", unsafe { hip::hipSetDevice(id) })
}

/// The device's name and its gfx architecture (`gfx90a:sramecc+:xnack-`).
pub fn device_name_and_arch(ordinal: usize) -> Result<(String, String), ErrorKind> {
    let id = c_int::try_from(ordinal).map_err(|_| {
        ErrorKind::driver(
            "hipGetDeviceProperties",
            format!("ordinal {ordinal} out of range"),
        )
    })?;
    // A zeroed struct (all plain integers and char arrays) with slack after
    // it, so a runtime whose struct grew cannot write past our buffer.
    #[repr(C)]
    struct Props {
        p: hip::hipDeviceProp_t,
        _slack: [u8; 4096],
    }
    // SAFETY: hipDeviceProp_t is plain old data; all-zero is a valid value.
    let mut props: Box<Props> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: writes at most one hipDeviceProp_t (792 bytes on ROCm 5.2,
    // the size these bindings have) into the boxed buffer.
    check("hipGetDeviceProperties", unsafe {
        hip::hipGetDeviceProperties(&mut props.p, id)
    })?;
    let text = |buf: &[c_char]| {
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok((text(&props.p.name), text(&props.p.gcnArchName)))
}

// ----- stream -----

/// A non-blocking stream: no implicit synchronisation with the null stream,
/// so other threads' work cannot join our captures.
pub struct Stream(hip::hipStream_t);

// SAFETY: stream handles are usable from any thread with the device selected.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new() -> Result<Self, ErrorKind> {
        let mut s: hip::hipStream_t = ptr::null_mut();
        // SAFETY: writes one stream handle on the current device.
        check("hipStreamCreateWithFlags", unsafe {
            hip::hipStreamCreateWithFlags(&mut s, hip::hipStreamNonBlocking)
        })?;
        Ok(Stream(s))
    }

    pub fn synchronize(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live.
        check("hipStreamSynchronize", unsafe {
            hip::hipStreamSynchronize(self.0)
        })
    }

    /// Start stream capture in thread-local mode (as the CUDA backend).
    pub fn begin_capture(&self) -> Result<(), ErrorKind> {
        // SAFETY: the stream is live and not capturing (core's state machine).
        check("hipStreamBeginCapture", unsafe {
            hip::hipStreamBeginCapture(
                self.0,
                hip::hipStreamCaptureMode::hipStreamCaptureModeThreadLocal,
            )
        })
    }

    /// End capture. The stream leaves capture mode whatever the result; an
    /// invalidated capture is an error and yields no graph.
    pub fn end_capture(&self) -> Result<Graph, ErrorKind> {
        let mut g: hip::hipGraph_t = ptr::null_mut();
        // SAFETY: writes one graph handle (null if the capture was invalidated).
        let r = unsafe { hip::hipStreamEndCapture(self.0, &mut g) };
        let graph = (!g.is_null()).then_some(Graph(g));
        check("hipStreamEndCapture", r)?;
        graph.ok_or_else(|| ErrorKind::driver("hipStreamEndCapture", "no graph was returned"))
    }

    pub fn is_capturing(&self) -> Result<bool, ErrorKind> {
        let mut status = hip::hipStreamCaptureStatus::hipStreamCaptureStatusNone;
        // SAFETY: writes one status value for a live stream.
        check("hipStreamIsCapturing", unsafe {
            hip::hipStreamIsCapturing(self.0, &mut status)
        })?;
        Ok(status != hip::hipStreamCaptureStatus::hipStreamCaptureStatusNone)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroys the stream created in new, once.
        let _ = unsafe { hip::hipStreamDestroy(self.0) };
    }
}

// ----- memory -----

/// One `hipMalloc` allocation (C5 is core's to enforce).
pub struct DeviceMemory {
    ptr: hip::hipDeviceptr_t,
    bytes: usize,
}

// SAFETY: a device pointer is a plain address, valid from any thread.
unsafe impl Send for DeviceMemory {}

impl DeviceMemory {
    pub fn alloc(bytes: usize) -> Result<Self, ErrorKind> {
        let mut ptr: *mut c_void = ptr::null_mut();
        // SAFETY: writes one device pointer on the current device.
        check("hipMalloc", unsafe { hip::hipMalloc(&mut ptr, bytes) })?;
        Ok(DeviceMemory { ptr, bytes })
    }

    fn range(&self, call: &'static str, offset: usize, len: usize) -> Result<(), ErrorKind> {
        match offset.checked_add(len) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(ErrorKind::driver(
                call,
                format!(
                    "{len} bytes at offset {offset} exceed the allocation's {}",
                    self.bytes
                ),
            )),
        }
    }

    /// Copy `data` in after all work queued on `stream`, and wait.
    pub fn write(&self, stream: &Stream, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        self.range("hipMemcpyHtoDAsync", offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: destination range checked against this live allocation; the
        // runtime only reads the source, which outlives the copy because we
        // synchronise before returning.
        check("hipMemcpyHtoDAsync", unsafe {
            hip::hipMemcpyHtoDAsync(
                (self.ptr as *mut u8).add(offset) as hip::hipDeviceptr_t,
                data.as_ptr() as *mut c_void,
                data.len(),
                stream.0,
            )
        })?;
        stream.synchronize()
    }

    /// Copy out after all work queued on `stream`, and wait.
    pub fn read(&self, stream: &Stream, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        self.range("hipMemcpyDtoHAsync", offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: source range checked against this live allocation; the
        // destination slice is borrowed mutably until we synchronise below.
        check("hipMemcpyDtoHAsync", unsafe {
            hip::hipMemcpyDtoHAsync(
                out.as_mut_ptr() as *mut c_void,
                (self.ptr as *mut u8).add(offset) as hip::hipDeviceptr_t,
                out.len(),
                stream.0,
            )
        })?;
        stream.synchronize()
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in alloc, once; the backend waits
        // for its stream before dropping memory work may still use.
        let _ = unsafe { hip::hipFree(self.ptr) };
    }
}

// ----- modules and launches -----

struct ModuleHandle(hip::hipModule_t);

// SAFETY: a module handle is never mutated after loading and is valid from
// any thread.
unsafe impl Send for ModuleHandle {}
// SAFETY: as above: shared references only read the handle.
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        // SAFETY: unloads the module loaded in Module::load, once, after every
        // Function (which holds an Arc to it) is gone.
        let _ = unsafe { hip::hipModuleUnload(self.0) };
    }
}

/// A loaded code object.
pub struct Module(std::sync::Arc<ModuleHandle>);

impl Module {
    /// `image` is an AMD code object from hipRTC.
    pub fn load(image: &[u8]) -> Result<Self, ErrorKind> {
        if image.is_empty() {
            return Err(ErrorKind::driver("hipModuleLoadData", "empty image"));
        }
        let mut m: hip::hipModule_t = ptr::null_mut();
        // SAFETY: the image is a complete code object from hipRTC; the
        // runtime copies what it needs before returning.
        check("hipModuleLoadData", unsafe {
            hip::hipModuleLoadData(&mut m, image.as_ptr() as *const c_void)
        })?;
        Ok(Module(std::sync::Arc::new(ModuleHandle(m))))
    }

    pub fn function(&self, name: &str) -> Result<Function, ErrorKind> {
        let cname = CString::new(name)
            .map_err(|_| ErrorKind::driver("hipModuleGetFunction", "name contains NUL"))?;
        let mut f: hip::hipFunction_t = ptr::null_mut();
        // SAFETY: the module is live; writes one function handle.
        check("hipModuleGetFunction", unsafe {
            hip::hipModuleGetFunction(&mut f, self.0 .0, cname.as_ptr())
        })
        .map_err(|e| match e {
            ErrorKind::Driver { message, .. } => {
                ErrorKind::driver("hipModuleGetFunction", format!("{name}: {message}"))
            }
            other => other,
        })?;
        Ok(Function {
            _module: self.0.clone(),
            f,
        })
    }
}

/// A kernel; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    _module: std::sync::Arc<ModuleHandle>,
    f: hip::hipFunction_t,
}

// SAFETY: function handles are usable from any thread.
unsafe impl Send for Function {}

/// Queue `f(buffers..., params)` on `stream` (or record it, while capturing).
/// Same argument block as the CUDA backend (kernels/cuda/README.md).
pub fn launch(
    f: &Function,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    stream: &Stream,
    buffers: &[&DeviceMemory],
    params: &Params,
) -> Result<(), ErrorKind> {
    let mut ptrs: Vec<hip::hipDeviceptr_t> = buffers.iter().map(|b| b.ptr).collect();
    let mut args: Vec<*mut c_void> = ptrs
        .iter_mut()
        .map(|p| p as *mut hip::hipDeviceptr_t as *mut c_void)
        .collect();
    let mut params = *params;
    args.push(&mut params as *mut Params as *mut c_void);
    // SAFETY: `args` holds one pointer per kernel parameter, each to a live
    // local of the parameter's exact type and layout (device pointers, then
    // the 32-byte repr(C) Params); the runtime copies them before returning.
    // The buffers are live allocations, large enough per core's validation.
    check("hipModuleLaunchKernel", unsafe {
        hip::hipModuleLaunchKernel(
            f.f,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            0,
            stream.0,
            args.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}

// ----- graphs -----

/// A captured graph (topology; replay needs an instantiated [`GraphExec`]).
pub struct Graph(hip::hipGraph_t);

// SAFETY: graph handles are usable from any thread.
unsafe impl Send for Graph {}

impl Graph {
    /// The 5-argument `hipGraphInstantiate` (CUDA's 3-argument form plus an
    /// error node and a log buffer, which we do not ask for).
    pub fn instantiate(&self) -> Result<GraphExec, ErrorKind> {
        let mut e: hip::hipGraphExec_t = ptr::null_mut();
        // SAFETY: the graph is live; writes one exec handle; null error-node
        // and log pointers with size 0 are allowed.
        check("hipGraphInstantiate", unsafe {
            hip::hipGraphInstantiate(&mut e, self.0, ptr::null_mut(), ptr::null_mut(), 0)
        })?;
        Ok(GraphExec(e))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: destroys the graph returned by end_capture, once (the shared
        // logic destroys its exec first).
        let _ = unsafe { hip::hipGraphDestroy(self.0) };
    }
}

/// An executable graph.
pub struct GraphExec(hip::hipGraphExec_t);

// SAFETY: exec handles are usable from any thread.
unsafe impl Send for GraphExec {}

type GraphUploadFn = unsafe extern "C" fn(hip::hipGraphExec_t, hip::hipStream_t) -> hip::hipError_t;

/// `hipGraphUpload`, which ROCm 5.2's runtime does not export (5.3 does):
/// looked up in the already-loaded libamdhip64, so linking never needs it.
fn graph_upload_fn() -> Option<GraphUploadFn> {
    static UPLOAD: OnceLock<Option<usize>> = OnceLock::new();
    let addr = *UPLOAD.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT only searches the loaded objects
        // (libamdhip64 is one: we link it) for a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"hipGraphUpload".as_ptr()) };
        (!p.is_null()).then_some(p as usize)
    });
    // SAFETY: the symbol is HIP's hipGraphUpload, whose C signature is
    // hipError_t (hipGraphExec_t, hipStream_t).
    addr.map(|a| unsafe { std::mem::transmute::<usize, GraphUploadFn>(a) })
}

impl GraphExec {
    /// Upload the exec's work ahead of its first launch, where the runtime
    /// can (ROCm ≥ 5.3); on older runtimes the first launch uploads it.
    pub fn upload(&self, stream: &Stream) -> Result<(), ErrorKind> {
        match graph_upload_fn() {
            // SAFETY: exec and stream are live.
            Some(upload) => check("hipGraphUpload", unsafe { upload(self.0, stream.0) }),
            None => Ok(()),
        }
    }

    pub fn launch(&self, stream: &Stream) -> Result<(), ErrorKind> {
        // SAFETY: exec and stream are live; the buffers the graph reads are
        // kept alive by core while the graph lives.
        check("hipGraphLaunch", unsafe {
            hip::hipGraphLaunch(self.0, stream.0)
        })
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: destroys the exec once; the shared logic waits for the
        // stream before destroying an exec a replay may still use (C8).
        let _ = unsafe { hip::hipGraphExecDestroy(self.0) };
    }
}

// ----- events -----

/// A timing event (default flags: timing enabled).
pub struct Event(hip::hipEvent_t);

// SAFETY: event handles are usable from any thread.
unsafe impl Send for Event {}

impl Event {
    pub fn new() -> Result<Self, ErrorKind> {
        let mut e: hip::hipEvent_t = ptr::null_mut();
        // SAFETY: writes one event handle.
        check("hipEventCreate", unsafe { hip::hipEventCreate(&mut e) })?;
        Ok(Event(e))
    }

    pub fn record(&self, stream: &Stream) -> Result<(), ErrorKind> {
        // SAFETY: event and stream are live.
        check("hipEventRecord", unsafe {
            hip::hipEventRecord(self.0, stream.0)
        })
    }

    pub fn synchronize(&self) -> Result<(), ErrorKind> {
        // SAFETY: the event is live.
        check("hipEventSynchronize", unsafe {
            hip::hipEventSynchronize(self.0)
        })
    }

    /// Milliseconds from `self` to `end`, both completed.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, ErrorKind> {
        let mut ms = 0f32;
        // SAFETY: both events are live; writes one float.
        check("hipEventElapsedTime", unsafe {
            hip::hipEventElapsedTime(&mut ms, self.0, end.0)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys the event created in new, once.
        let _ = unsafe { hip::hipEventDestroy(self.0) };
    }
}

// ----- hipRTC -----

/// hipRTC's handle and entry points (in libamdhip64 since ROCm 4.2; not
/// bound by hip-runtime-sys 0.1.2). `hiprtcResult` is a C enum: an int.
type HiprtcProgram = *mut c_void;
const HIPRTC_SUCCESS: c_int = 0;

#[link(name = "amdhip64")]
extern "C" {
    fn hiprtcVersion(major: *mut c_int, minor: *mut c_int) -> c_int;
    fn hiprtcGetErrorString(result: c_int) -> *const c_char;
    fn hiprtcCreateProgram(
        prog: *mut HiprtcProgram,
        src: *const c_char,
        name: *const c_char,
        num_headers: c_int,
        headers: *const *const c_char,
        include_names: *const *const c_char,
    ) -> c_int;
    fn hiprtcCompileProgram(
        prog: HiprtcProgram,
        num_options: c_int,
        options: *const *const c_char,
    ) -> c_int;
    fn hiprtcGetProgramLogSize(prog: HiprtcProgram, size: *mut usize) -> c_int;
    fn hiprtcGetProgramLog(prog: HiprtcProgram, log: *mut c_char) -> c_int;
    fn hiprtcGetCodeSize(prog: HiprtcProgram, size: *mut usize) -> c_int;
    fn hiprtcGetCode(prog: HiprtcProgram, code: *mut c_char) -> c_int;
    fn hiprtcDestroyProgram(prog: *mut HiprtcProgram) -> c_int;
}

fn check_rtc(call: &'static str, r: c_int) -> Result<(), ErrorKind> {
    if r == HIPRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a static NUL-terminated string (or null).
    let text = unsafe { hiprtcGetErrorString(r) };
    let msg = if text.is_null() {
        format!("hiprtcResult {r}")
    } else {
        // SAFETY: non-null, static, NUL-terminated.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(ErrorKind::driver(call, msg))
}

/// hipRTC's version (major, minor).
pub fn hiprtc_version() -> Result<(i32, i32), ErrorKind> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    check_rtc("hiprtcVersion", unsafe {
        hiprtcVersion(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

struct Program(HiprtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: destroys the program created in hiprtc_compile, once.
        let _ = unsafe { hiprtcDestroyProgram(&mut self.0) };
    }
}

/// Compile CUDA C / HIP C with hipRTC into an AMD code object. A compile
/// error carries hipRTC's log. Needs no GPU.
pub fn hiprtc_compile(source: &str, name: &str, options: &[String]) -> Result<Vec<u8>, ErrorKind> {
    let src = CString::new(source)
        .map_err(|_| ErrorKind::driver("hiprtcCreateProgram", "source contains NUL"))?;
    let cname = CString::new(name)
        .map_err(|_| ErrorKind::driver("hiprtcCreateProgram", "name contains NUL"))?;
    let opts: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| ErrorKind::driver("hiprtcCompileProgram", "option contains NUL"))?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();

    let mut prog: HiprtcProgram = ptr::null_mut();
    // SAFETY: source and name are NUL-terminated and outlive the program
    // (dropped at the end of this function); no headers are passed.
    check_rtc("hiprtcCreateProgram", unsafe {
        hiprtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            cname.as_ptr(),
            0,
            ptr::null(),
            ptr::null(),
        )
    })?;
    let prog = Program(prog);

    // SAFETY: opt_ptrs points at NUL-terminated strings that outlive the call.
    let compiled =
        unsafe { hiprtcCompileProgram(prog.0, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
    if compiled != HIPRTC_SUCCESS {
        let log = program_log(&prog).unwrap_or_else(|e| format!("(no log: {e})"));
        let what = check_rtc("hiprtcCompileProgram", compiled)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(ErrorKind::driver(
            "hiprtcCompileProgram",
            format!("{name}: {what}\n{log}"),
        ));
    }
    let mut size: usize = 0;
    // SAFETY: the program compiled; writes one size.
    check_rtc("hiprtcGetCodeSize", unsafe {
        hiprtcGetCodeSize(prog.0, &mut size)
    })?;
    let mut image = vec![0u8; size];
    if size > 0 {
        // SAFETY: the buffer holds exactly the size hipRTC reported.
        check_rtc("hiprtcGetCode", unsafe {
            hiprtcGetCode(prog.0, image.as_mut_ptr() as *mut c_char)
        })?;
    }
    Ok(image)
}

fn program_log(prog: &Program) -> Result<String, ErrorKind> {
    let mut size: usize = 0;
    // SAFETY: the program is live; writes one size.
    check_rtc("hiprtcGetProgramLogSize", unsafe {
        hiprtcGetProgramLogSize(prog.0, &mut size)
    })?;
    let mut log = vec![0u8; size.max(1)];
    // SAFETY: the buffer holds at least the size hipRTC reported.
    check_rtc("hiprtcGetProgramLog", unsafe {
        hiprtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut c_char)
    })?;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Ok(String::from_utf8_lossy(&log[..end]).into_owned())
}
