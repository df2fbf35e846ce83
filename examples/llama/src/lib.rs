//! # seam-example-llama
//!
//! A Llama-architecture model (llama2.c checkpoints: RMSNorm, RoPE,
//! grouped-query attention, SwiGLU) decoded through seam the way an
//! inference engine would: catalogue GEMMs, copy, rms_norm, silu and mul
//! around three user kernels (RoPE and the fused residual add + rms_norm
//! from the decode example, and this crate's [`attention::ATTENTION`]); the
//! K and V projections written straight into the cache slot through views;
//! the whole step **captured once**, then moved to each position and token
//! by one graph update and replayed ([`step::Llama`]). Or K tokens per
//! replay: the step captured inside a WHILE (C14), the next token chosen on
//! the device ([`step::Llama::decode_on_device`], [`loop_kernels`]).
//!
//! [`check::check`] teacher-forces a reference's tokens and compares the
//! logits it lists; `seam-llama check` and `seam-llama generate` are the
//! commands.

pub mod attention;
pub mod bench;
pub mod check;
pub mod gguf;
pub mod loop_kernels;
pub mod model;
pub mod reference;
pub mod step;

pub use check::{check, Report};
pub use model::{Config, LoadError, Model};
pub use step::{Llama, Mode, Timings};

use std::fmt;

/// Why a run stopped.
#[derive(Debug)]
pub enum Error {
    /// A device call failed (the error names the backend, the device and the call).
    Device(seam::Error),
    /// The checkpoint could not be read.
    Load(LoadError),
    /// The reference file could not be read: the file, line and why.
    Reference(String),
    /// A request the model cannot serve (a token past the vocabulary, a
    /// position past the cache).
    Input(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Device(e) => e.fmt(f),
            Error::Load(e) => e.fmt(f),
            Error::Reference(s) | Error::Input(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Error {}

impl From<seam::Error> for Error {
    fn from(e: seam::Error) -> Error {
        Error::Device(e)
    }
}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Error {
        Error::Load(e)
    }
}
