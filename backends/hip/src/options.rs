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

/// What kernels built for `arch` with `opts` promise for f32 subnormals
/// (C11). clang keeps them (`denormal-fp-math-f32=ieee`) on gfx9 and later
/// unless an option asks for flushing or fast math; on gfx8 and older it
/// flushes f32 denormals by default.
pub fn subnormals(arch: &str, opts: &[String]) -> seam::Subnormals {
    let flushing = |o: &str| {
        o == "-fgpu-flush-denormals-to-zero"
            || o == "-fcuda-flush-denormals-to-zero"
            || o == "-ffast-math"
            || o == "-Ofast"
            || o.starts_with("-fdenormal-fp-math")
    };
    if let Some(o) = opts.iter().find(|o| flushing(o)) {
        return seam::Subnormals::MayFlush(format!("hipRTC option {o} may flush f32 subnormals"));
    }
    let major: Option<u32> = arch.strip_prefix("gfx").and_then(|rest| {
        // gfx803, gfx90a: one digit of major version; gfx1030: two
        // (`:sramecc+` and other feature suffixes are not part of it).
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        match name.len() {
            3 => name[..1].parse().ok(),
            4 => name[..2].parse().ok(),
            _ => None,
        }
    });
    match major {
        Some(m) if m >= 9 => seam::Subnormals::Preserved,
        _ => seam::Subnormals::MayFlush(format!(
            "{arch}: clang flushes f32 denormals by default before gfx9"
        )),
    }
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
