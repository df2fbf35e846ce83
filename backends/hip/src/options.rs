//! hipRTC build options: the device-code optimisation level (seed 003).
//!
//! At -O0 the device code gains a dynamic stack and hostcall buffers, and the
//! runtime's hostcall listener can hang process teardown. So when nothing
//! sets a level, kernels are built at [`DEFAULT_LEVEL`]; an explicit level
//! from the user (`SEAM_HIP_OPTIONS`) is kept, even `-O0`. Options that only
//! look like levels (`--rocm-path=/opt/rocm`, `-DOPT=1`) are not levels.

/// The level used when the user sets none: what hipcc builds device code at.
pub const DEFAULT_LEVEL: &str = "-O3";

/// Extra hipRTC options, whitespace-separated.
pub const OPTIONS_ENV: &str = "SEAM_HIP_OPTIONS";

/// Whether `opt` is a clang optimisation level (`-O`, `-O0`…`-O3`, `-O4`,
/// `-Os`, `-Oz`, `-Og`, `-Ofast`).
pub fn is_opt_level(opt: &str) -> bool {
    let Some(rest) = opt.strip_prefix("-O") else {
        return false;
    };
    rest.is_empty()
        || rest.chars().all(|c| c.is_ascii_digit())
        || matches!(rest, "s" | "z" | "g" | "fast")
}

/// The options every kernel is built with for `arch`, then the user's.
/// `-ffp-contract=off`: no fused multiply-add anywhere, like the CPU
/// reference and the CUDA backend's `--fmad=false` (C11).
pub fn build_options(arch: &str, user: &[String]) -> Vec<String> {
    let mut opts = vec![
        format!("--gpu-architecture={arch}"),
        "-ffp-contract=off".to_string(),
    ];
    if !user.iter().any(|o| is_opt_level(o)) {
        opts.push(DEFAULT_LEVEL.to_string());
    }
    opts.extend(user.iter().cloned());
    opts
}

/// The user's options from `SEAM_HIP_OPTIONS` (empty when unset).
pub fn user_options() -> Vec<String> {
    split_options(&std::env::var(OPTIONS_ENV).unwrap_or_default())
}

/// Whitespace-separated options.
pub fn split_options(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// The optimisation level the device code is compiled at: the last one in
/// `opts` (clang's rule), or `None`.
pub fn effective_level(opts: &[String]) -> Option<&str> {
    opts.iter()
        .rev()
        .find(|o| is_opt_level(o))
        .map(String::as_str)
}
