//! Certify the queue backend: every case of seam's conformance suite on its
//! device, as libtest trials. `SEAM_CONFORMANCE_REPORT=<dir>` also writes
//! the JSON, JUnit and Markdown reports.

fn main() {
    seam_conformance::harness::certify(&[&seam_queue_backend::REGISTRATION]);
}
