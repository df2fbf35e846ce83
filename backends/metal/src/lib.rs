//! Placeholder until this backend lands: reports itself unavailable.
use seam::{Backend, ErrorKind};

pub fn device_count() -> Result<usize, String> {
    Err("backend not implemented yet".into())
}

pub fn open(index: usize) -> Result<Box<dyn Backend>, ErrorKind> {
    Err(ErrorKind::Unavailable { reason: format!("device {index}: backend not implemented yet") })
}
