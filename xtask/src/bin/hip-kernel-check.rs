//! Compile every seam kernel with hipRTC for one AMD architecture, no GPU
//! needed: `hip-kernel-check gfx90a`. Every catalogue op, then the user
//! kernels the suite certifies (`seam_kernels::user::ALL`), each through
//! `seam_hip::compile_kernel`, the backend's own path (a user kernel's CUDA C
//! with the prelude, `seam_kernels::source`). Exits 0 when every kernel
//! compiled, 1 when one failed (its hipRTC log is printed), 2 on bad usage.
//! The seam guard runs it once per architecture in a child process, so a
//! runtime that crashes on an architecture (ROCm 5.2 on gfx1200) cannot take
//! the guard down.
//!
//! It lives in xtask, beside the seam guard that runs it, so seam-hip ships
//! no tool of CI's. Build it with `--features rocm` (links libamdhip64,
//! decision D9).

use seam::{Kernel, OpKind};
use std::process::ExitCode;

/// What is compiled: the catalogue, then the suite's user kernels that
/// have CUDA C (hipRTC compiles that; a WGSL-only kernel has nothing for
/// HIP, and the HIP backend refuses it at registration).
fn kernels() -> Vec<OpKind> {
    OpKind::ALL
        .into_iter()
        .chain(
            seam_kernels::user::ALL
                .iter()
                .filter(|def| def.cuda.is_some())
                .map(|&def| OpKind::User(Kernel::new(def))),
        )
        .collect()
}

fn label(op: OpKind) -> String {
    match op.user() {
        Some(k) => format!("user:{}", k.name()),
        None => op.name().to_string(),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [arch] = args.as_slice() else {
        eprintln!("usage: hip-kernel-check <gfx arch>   (e.g. gfx90a)");
        return ExitCode::from(2);
    };
    let rtc = match seam_hip::hiprtc_version() {
        Ok((a, b)) => format!("hipRTC {a}.{b}"),
        Err(e) => format!("hipRTC version unknown ({e})"),
    };
    let opts = seam_hip::options::build_options(arch, &seam_hip::options::user_options());
    println!("{arch}: {rtc}, options {}", opts.join(" "));
    let all = kernels();
    let mut failed = 0;
    for &op in &all {
        match seam_hip::compile_kernel(arch, op) {
            Ok(bytes) => println!("  {:<22} ok   {bytes} bytes", label(op)),
            Err(e) => {
                println!("  {:<22} FAILED: {e}", label(op));
                failed += 1;
            }
        }
    }
    let users = all.len() - OpKind::ALL.len();
    if failed == 0 {
        println!(
            "{arch}: all {} kernels compiled ({} catalogue, {users} user)",
            all.len(),
            OpKind::ALL.len()
        );
        ExitCode::SUCCESS
    } else {
        println!("{arch}: {failed} of {} kernels failed", all.len());
        ExitCode::FAILURE
    }
}
