//! # seam-reliability
//!
//! Checks that hold the seam's shared semantics to account on any backend:
//!
//! - [`machine`]: random sequences of `Device` calls (proptest) run against a
//!   reference [`model`]; same outcomes, same named errors, same contents, no
//!   leak once every handle is dropped.
//! - [`faulty`] and [`faults`]: a wrapper backend that fails the k-th call, and
//!   a sweep over every k of representative workloads: afterwards the device
//!   still works, no capture is left open, nothing leaks, and the error names
//!   the failed call.
//!
//! Both take a backend opener, so the same checks run on the CPU backend in
//! CI and on every device `seam_backends::discover()` finds.

pub mod faults;
pub mod faulty;
pub mod machine;
pub mod model;
pub mod steps;

use seam::{Backend, ErrorKind};

/// Opens a fresh backend (the shape of `seam_backends::Opener`).
pub type Opener = dyn Fn() -> Result<Box<dyn Backend>, ErrorKind> + Send + Sync;

pub use faulty::{FaultPlan, FaultyBackend};
pub use machine::{check_against_model, run_sequence, PropConfig, PropReport};
