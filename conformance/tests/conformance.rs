//! `cargo test -p seam-conformance`: every case on every discovered device,
//! as libtest trials named `<device>::<case>[::<mode>]`. Devices that are
//! missing give ignored trials whose reason says what to install.

fn main() {
    seam_conformance::harness::run(seam_backends::discover());
}
