//! Compile every seam kernel with hipRTC for one AMD architecture, no GPU
//! needed: `hip-kernel-check gfx90a`. Exits 0 when every kernel compiled,
//! 1 when one failed (its hipRTC log is printed), 2 on bad usage. The seam
//! guard runs it once per architecture in a child process, so a runtime that
//! crashes on an architecture (ROCm 5.2 on gfx1200) cannot take the guard down.

use seam::OpKind;
use std::process::ExitCode;

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
    let mut failed = 0;
    for op in OpKind::ALL {
        match seam_hip::compile_kernel(arch, op) {
            Ok(bytes) => println!("  {:<10} ok   {bytes} bytes", op.name()),
            Err(e) => {
                println!("  {:<10} FAILED: {e}", op.name());
                failed += 1;
            }
        }
    }
    if failed == 0 {
        println!("{arch}: all {} kernels compiled", OpKind::ALL.len());
        ExitCode::SUCCESS
    } else {
        println!("{arch}: {failed} of {} kernels failed", OpKind::ALL.len());
        ExitCode::FAILURE
    }
}
