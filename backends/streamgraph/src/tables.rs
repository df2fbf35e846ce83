//! The backend's kernel table on the launch path, indexed rather than
//! hashed: a launch looks up its kernel, and with `std`'s SipHash that
//! lookup costs more than the rest of the backend's launch (its buffers are
//! in core's slot table, `seam::table::Buffers`). [`KernelTable`]: a
//! catalogue op's entry points in a fixed array by (op, dtype); user kernels
//! (few per device) in a short list.

use seam::{DType, OpKind};

/// Entry points by (op, dtype).
pub(crate) struct KernelTable<F> {
    catalogue: Vec<Option<F>>,
    user: Vec<(OpKind, DType, F)>,
}

/// Where a catalogue op's entry point for `dtype` lives; `None` for a user
/// kernel.
fn catalogue_slot(op: OpKind, dtype: DType) -> Option<usize> {
    let op = match op {
        OpKind::Fill => 0,
        OpKind::Copy => 1,
        OpKind::ScaleAdd => 2,
        OpKind::Add => 3,
        OpKind::Mul => 4,
        OpKind::Silu => 5,
        OpKind::RmsNorm => 6,
        OpKind::Softmax => 7,
        OpKind::Gemm => 8,
        OpKind::User(_) => return None,
    };
    let dtype = match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Bf16 => 2,
        DType::I32 => 3,
        DType::U32 => 4,
    };
    Some(op * DType::ALL.len() + dtype)
}

impl<F> KernelTable<F> {
    pub(crate) fn new() -> Self {
        let slots = OpKind::ALL.len() * DType::ALL.len();
        KernelTable {
            catalogue: (0..slots).map(|_| None).collect(),
            user: Vec::new(),
        }
    }

    pub(crate) fn get(&self, op: OpKind, dtype: DType) -> Option<&F> {
        match catalogue_slot(op, dtype) {
            Some(i) => self.catalogue[i].as_ref(),
            None => self
                .user
                .iter()
                .find(|(o, d, _)| *o == op && *d == dtype)
                .map(|(_, _, f)| f),
        }
    }

    /// Keep `f` as (op, dtype)'s entry point (replacing one held before).
    pub(crate) fn insert(&mut self, op: OpKind, dtype: DType, f: F) {
        match catalogue_slot(op, dtype) {
            Some(i) => self.catalogue[i] = Some(f),
            None => match self
                .user
                .iter_mut()
                .find(|(o, d, _)| *o == op && *d == dtype)
            {
                Some(held) => held.2 = f,
                None => self.user.push((op, dtype, f)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (op, dtype) has its own entry: catalogue slots don't collide,
    /// user kernels are found by kernel and dtype.
    #[test]
    fn kernels_are_found_under_their_own_key() {
        let mut t = KernelTable::new();
        let keys: Vec<(OpKind, DType)> = OpKind::ALL
            .into_iter()
            .flat_map(|op| DType::ALL.map(|d| (op, d)))
            .collect();
        for (i, &(op, d)) in keys.iter().enumerate() {
            assert_eq!(t.get(op, d), None);
            t.insert(op, d, i);
        }
        for (i, &(op, d)) in keys.iter().enumerate() {
            assert_eq!(t.get(op, d), Some(&i), "{op}/{d}");
        }
    }
}
