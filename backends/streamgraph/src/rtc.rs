//! What NVRTC and hipRTC both take and give back: NUL-terminated source,
//! name and options in; a NUL-terminated log out. Prepared here once; the
//! compile calls themselves are each backend's `sys`.

use seam::ErrorKind;
use std::ffi::{c_char, c_int, CString};

/// A program's source, name and options as C strings, with the option
/// pointer array the compile call takes. Pointers stay valid while `self` lives.
pub struct RtcInput {
    source: CString,
    name: CString,
    _options: Vec<CString>,
    option_ptrs: Vec<*const c_char>,
}

impl RtcInput {
    /// `prefix` names the calls in errors (`nvrtc`, `hiprtc`).
    pub fn new(
        prefix: &str,
        source: &str,
        name: &str,
        options: &[String],
    ) -> Result<Self, ErrorKind> {
        let nul = |call: &str, what: &str| {
            ErrorKind::driver(format!("{prefix}{call}"), format!("{what} contains NUL"))
        };
        let source = CString::new(source).map_err(|_| nul("CreateProgram", "source"))?;
        let name = CString::new(name).map_err(|_| nul("CreateProgram", "name"))?;
        let options: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| nul("CompileProgram", "option"))?;
        let option_ptrs = options.iter().map(|o| o.as_ptr()).collect();
        Ok(RtcInput {
            source,
            name,
            _options: options,
            option_ptrs,
        })
    }

    pub fn source(&self) -> *const c_char {
        self.source.as_ptr()
    }

    pub fn name(&self) -> *const c_char {
        self.name.as_ptr()
    }

    pub fn option_count(&self) -> c_int {
        self.option_ptrs.len() as c_int
    }

    /// `option_count` pointers to NUL-terminated options.
    pub fn options(&self) -> *const *const c_char {
        self.option_ptrs.as_ptr()
    }
}

/// A buffer for a log of `size` bytes as the compiler reports it (at least one).
pub fn log_buffer(size: usize) -> Vec<u8> {
    vec![0u8; size.max(1)]
}

/// A compiler log's text: the buffer up to its first NUL.
pub fn log_text(log: &[u8]) -> String {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    String::from_utf8_lossy(&log[..end]).into_owned()
}

/// `Ok` for a call that succeeded, else the driver error naming the call.
pub fn driver_result(
    call: &'static str,
    succeeded: bool,
    describe: impl FnOnce() -> String,
) -> Result<(), ErrorKind> {
    if succeeded {
        Ok(())
    } else {
        Err(ErrorKind::driver(call, describe()))
    }
}

/// A compile failure of a user kernel as the user sees it: its name, the
/// compiler and the compiler's log ([`ErrorKind::KernelCompile`]); any
/// other error, and any catalogue op's, unchanged.
pub fn user_compile_error(op: seam::OpKind, compiler: &str, e: ErrorKind) -> ErrorKind {
    match (op, e) {
        (
            seam::OpKind::User(k),
            ErrorKind::Driver {
                driver_call,
                message,
            },
        ) if driver_call.ends_with("CompileProgram") => ErrorKind::KernelCompile {
            kernel: k.name(),
            compiler: format!("{compiler} ({driver_call})"),
            log: message,
        },
        (_, e) => e,
    }
}

/// A compile failure: the program's name, what the compiler said, and its
/// log (or why there is none).
pub fn compile_error(
    call: &'static str,
    name: &str,
    what: impl std::fmt::Display,
    log: Result<String, ErrorKind>,
) -> ErrorKind {
    let log = log.unwrap_or_else(|e| format!("(no log: {e})"));
    ErrorKind::driver(call, format!("{name}: {what}\n{log}"))
}
