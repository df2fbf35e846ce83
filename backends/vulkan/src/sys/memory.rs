//! Buffers and their memory: allocation, binding, the host mapping.

use super::device::{lock, Gpu, Shared};
use super::drv;
use ash::vk;
use seam::ErrorKind;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Host mapping of a host-visible, host-coherent allocation.
pub(super) struct Mapped {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the pointer is a mapping of device memory owned by the same
// `BufferInner`; nothing about it is tied to the thread that mapped it.
// Access goes through the `Mutex` around it.
unsafe impl Send for Mapped {}

struct BufferInner {
    shared: Arc<Shared>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    mapped: Option<Mutex<Mapped>>,
    /// Made with INDIRECT_BUFFER usage: it may hold a dispatch's
    /// indirect arguments.
    indirect: bool,
    /// Serial of the last submission that used the buffer (0: none).
    last_use: AtomicU64,
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if self.shared.leaked() {
            return;
        }
        // SAFETY: the last reference is gone, and every pending submission
        // that uses the buffer holds one (through its command buffer); so no
        // pending work uses it. Freeing the memory unmaps it.
        unsafe {
            self.shared.device.destroy_buffer(self.buffer, None);
            self.shared.device.free_memory(self.memory, None);
        }
    }
}

/// A storage buffer with its own memory. Clones share it; it is destroyed
/// with the last clone, which pending work holds while it runs.
#[derive(Clone)]
pub struct Buffer(Arc<BufferInner>);

impl Buffer {
    pub fn size(&self) -> u64 {
        self.0.size
    }

    pub fn is_mapped(&self) -> bool {
        self.0.mapped.is_some()
    }

    pub(super) fn handle(&self) -> vk::Buffer {
        self.0.buffer
    }

    /// Whether it may hold indirect arguments ([`Gpu::create_control_buffer`]).
    pub(super) fn indirect(&self) -> bool {
        self.0.indirect
    }

    pub(super) fn same(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Whether it was made by the device `shared`.
    pub(super) fn of(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.0.shared, shared)
    }

    /// The host-access lock (mapped buffers only): [`Gpu::submit`] holds it
    /// while it submits work that uses the buffer and stamps `last_use`, so
    /// a host copy is either done before the device may start or refused.
    pub(super) fn host_lock(&self) -> Option<MutexGuard<'_, Mapped>> {
        self.0.mapped.as_ref().map(lock)
    }

    pub(super) fn set_last_use(&self, serial: u64) {
        self.0.last_use.fetch_max(serial, Ordering::AcqRel);
    }

    /// The mapping, once no pending submission uses the buffer.
    fn mapping(&self, what: &'static str) -> Result<MutexGuard<'_, Mapped>, ErrorKind> {
        let guard = self
            .host_lock()
            .ok_or_else(|| ErrorKind::driver(what, "the buffer is not host-visible"))?;
        // Under the lock: a submission using the buffer is either stamped
        // already or waits for this access to finish.
        let last = self.0.last_use.load(Ordering::Acquire);
        if last > self.0.shared.completed() {
            return Err(ErrorKind::driver(
                what,
                format!("the buffer is in use by submission {last}, which has not completed"),
            ));
        }
        Ok(guard)
    }

    /// Copy `data` to byte `offset`. Refused while a submission that uses the
    /// buffer is pending (wait first: [`Gpu::wait_idle`]).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), ErrorKind> {
        let m = self.mapping("mapped memory write")?;
        check(&m, offset, data.len())?;
        // SAFETY: the range is inside the mapping (checked); no pending
        // submission uses the memory (checked under the lock, which
        // `Gpu::submit` holds while it submits work using the buffer and
        // stamps `last_use`); the lock excludes other host access; `data`
        // cannot overlap the mapping (nothing hands out a slice of it).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), m.ptr.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copy from byte `offset` into `out`; refused as [`Buffer::write`]. The
    /// memory is coherent and every command buffer ends with a host barrier,
    /// so completed device writes are visible.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), ErrorKind> {
        let m = self.mapping("mapped memory read")?;
        check(&m, offset, out.len())?;
        // SAFETY: as in `write`, reading instead; `out` is a distinct Rust
        // borrow, so it cannot overlap the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(m.ptr.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }
}

fn check(m: &Mapped, offset: usize, len: usize) -> Result<(), ErrorKind> {
    match offset.checked_add(len) {
        Some(end) if end <= m.len => Ok(()),
        _ => Err(ErrorKind::driver(
            "mapped memory access",
            format!("{len} bytes at {offset} exceed the {}-byte mapping", m.len),
        )),
    }
}

impl Gpu {
    /// A storage buffer (also a copy source and destination) bound to fresh
    /// memory of the first type in `prefer` (memory property sets, best
    /// first) that the buffer accepts, dedicated to it where the device has
    /// Vulkan 1.1 (`Adapter::dedicated`); mapped when the type is
    /// host-visible and coherent.
    pub fn create_buffer(
        &self,
        size: u64,
        prefer: &[vk::MemoryPropertyFlags],
    ) -> Result<Buffer, ErrorKind> {
        let usage = vk::BufferUsageFlags::TRANSFER_SRC;
        create(&self.shared, size, STORAGE | usage, prefer)
    }

    /// A buffer of `size` bytes a graph's conditional bodies keep their
    /// control words in (`seam_kernels::conditional`): a storage buffer the
    /// gates write, read as indirect dispatch arguments, written by
    /// `vkCmdUpdateBuffer`; in the memory of the first type in `prefer`.
    pub fn create_control_buffer(
        &self,
        size: u64,
        prefer: &[vk::MemoryPropertyFlags],
    ) -> Result<Buffer, ErrorKind> {
        let usage = vk::BufferUsageFlags::INDIRECT_BUFFER;
        create(&self.shared, size, STORAGE | usage, prefer)
    }
}

/// What every buffer seam makes is: a storage buffer, written by transfers.
const STORAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw() | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// A uniform buffer of `size` bytes in host-visible, coherent memory
/// (device-local too where the device has such a type), mapped: the
/// kernels' parameter blocks a command buffer writes
/// (`command/params.rs`).
pub(super) fn create_uniform(shared: &Arc<Shared>, size: u64) -> Result<Buffer, ErrorKind> {
    create(
        shared,
        size,
        vk::BufferUsageFlags::UNIFORM_BUFFER,
        &PARAM_MEMORY,
    )
}

/// The parameter buffers' memory, best first: device-local and mapped
/// (a discrete GPU's resizable BAR), else any mapped, coherent type.
const PARAM_MEMORY: [vk::MemoryPropertyFlags; 2] = [
    vk::MemoryPropertyFlags::from_raw(
        vk::MemoryPropertyFlags::DEVICE_LOCAL.as_raw() | HOST_COHERENT.as_raw(),
    ),
    HOST_COHERENT,
];

/// A buffer of `usage` bound to fresh memory, as [`Gpu::create_buffer`]
/// describes.
fn create(
    shared: &Arc<Shared>,
    size: u64,
    usage: vk::BufferUsageFlags,
    prefer: &[vk::MemoryPropertyFlags],
) -> Result<Buffer, ErrorKind> {
    let d = &shared.device;
    let info = vk::BufferCreateInfo::default()
        .size(size.max(4))
        .usage(usage)
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    // SAFETY: valid create info (size > 0) living across the call.
    let buffer = unsafe { d.create_buffer(&info, None) }.map_err(drv("vkCreateBuffer"))?;
    match bind_memory(shared, buffer, prefer) {
        Ok((memory, mapped)) => Ok(Buffer(Arc::new(BufferInner {
            shared: shared.clone(),
            buffer,
            memory,
            size,
            mapped: mapped.map(Mutex::new),
            indirect: usage.contains(vk::BufferUsageFlags::INDIRECT_BUFFER),
            last_use: AtomicU64::new(0),
        }))),
        Err(e) => {
            // SAFETY: the buffer was never bound or used.
            unsafe { d.destroy_buffer(buffer, None) };
            Err(e)
        }
    }
}

fn bind_memory(
    shared: &Shared,
    buffer: vk::Buffer,
    prefer: &[vk::MemoryPropertyFlags],
) -> Result<(vk::DeviceMemory, Option<Mapped>), ErrorKind> {
    let d = &shared.device;
    // SAFETY: `buffer` is live.
    let req = unsafe { d.get_buffer_memory_requirements(buffer) };
    let mem = &shared.adapter.memory;
    let types = &mem.memory_types[..mem.memory_type_count as usize];
    let index = memory_type(req.memory_type_bits, types, prefer).ok_or_else(|| {
        ErrorKind::driver(
            "vkAllocateMemory",
            format!("no memory type with {prefer:?} accepts this buffer"),
        )
    })?;
    let flags = types[index].property_flags;
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
    let mut info = vk::MemoryAllocateInfo::default()
        .allocation_size(req.size)
        .memory_type_index(index as u32);
    if shared.adapter.dedicated {
        info = info.push_next(&mut dedicated);
    }
    // SAFETY: valid allocate info for a type the buffer accepts; where
    // it names the buffer as the allocation's one user, instance and
    // device are at Vulkan 1.1 or later (where that struct is core) and
    // the buffer is live and unbound.
    let memory = unsafe { d.allocate_memory(&info, None) }.map_err(drv("vkAllocateMemory"))?;
    let bound = (|| {
        // SAFETY: fresh memory of an accepted type and size, offset 0;
        // the buffer is unbound.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }.map_err(drv("vkBindBufferMemory"))?;
        if !flags.contains(HOST_COHERENT) {
            return Ok(None);
        }
        // SAFETY: host-visible memory, not mapped yet, whole range.
        let ptr = unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
            .map_err(drv("vkMapMemory"))?;
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| ErrorKind::driver("vkMapMemory", "returned a null pointer"))?;
        Ok(Some(Mapped {
            ptr,
            len: req.size as usize,
        }))
    })();
    match bound {
        Ok(mapped) => Ok((memory, mapped)),
        Err(e) => {
            // SAFETY: the memory is unused (binding or mapping failed).
            unsafe { d.free_memory(memory, None) };
            Err(e)
        }
    }
}

/// Memory the host maps and sees coherently (a copy through it needs no
/// flush): what every mapped buffer and the staging buffer need.
pub const HOST_COHERENT: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::from_raw(
    vk::MemoryPropertyFlags::HOST_VISIBLE.as_raw()
        | vk::MemoryPropertyFlags::HOST_COHERENT.as_raw(),
);

/// The memory type a buffer gets: of the types the buffer accepts (bit `i`
/// of `accepted` set), the first with every property of the first
/// preference any has.
fn memory_type(
    accepted: u32,
    types: &[vk::MemoryType],
    prefer: &[vk::MemoryPropertyFlags],
) -> Option<usize> {
    prefer.iter().find_map(|want| {
        types
            .iter()
            .enumerate()
            .position(|(i, t)| accepted & (1 << i) != 0 && t.property_flags.contains(*want))
    })
}

#[cfg(test)]
mod tests {
    use super::memory_type;
    use ash::vk::{MemoryPropertyFlags as M, MemoryType};

    /// A discrete GPU's memory (device-local; host-visible and coherent;
    /// the same, cached): the first preference any accepted type has wins,
    /// and a type the buffer does not accept is never taken. lavapipe has
    /// one type with every property, where any choice is the same.
    #[test]
    fn a_buffer_gets_the_first_preferred_type_it_accepts() {
        let coherent = M::HOST_VISIBLE | M::HOST_COHERENT;
        let types = [M::DEVICE_LOCAL, coherent, coherent | M::HOST_CACHED].map(|f| MemoryType {
            property_flags: f,
            heap_index: 0,
        });
        let all = 0b111;
        assert_eq!(
            memory_type(all, &types, &[M::DEVICE_LOCAL, M::empty()]),
            Some(0)
        );
        assert_eq!(
            memory_type(all, &types, &[coherent | M::HOST_CACHED, coherent]),
            Some(2)
        );
        assert_eq!(memory_type(all, &types, &[coherent]), Some(1));
        // Type 0 not accepted: the next type with the preference, else the
        // next preference.
        assert_eq!(
            memory_type(0b110, &types, &[M::DEVICE_LOCAL, M::empty()]),
            Some(1)
        );
        assert_eq!(memory_type(0b100, &types, &[coherent]), Some(2));
        assert_eq!(memory_type(0b001, &types, &[coherent]), None);
        assert_eq!(memory_type(all, &types, &[]), None);
    }

    /// The parameter buffers always get mapped, coherent memory: on a
    /// discrete GPU's types (device-local; host-visible and coherent; the
    /// same, device-local too, as with resizable BAR) the device-local
    /// mapped type where there is one, else the host's, never device-local
    /// memory the host cannot map. Mutation: `|` → `&` in `PARAM_MEMORY`
    /// (an empty first preference, which any type has) → red; lavapipe's
    /// one type has every property, so no device here shows it.
    #[test]
    fn parameter_blocks_get_mapped_memory_preferring_device_local() {
        use super::{HOST_COHERENT, PARAM_MEMORY};
        let bar = M::DEVICE_LOCAL | HOST_COHERENT;
        let types = [M::DEVICE_LOCAL, HOST_COHERENT, bar].map(|f| MemoryType {
            property_flags: f,
            heap_index: 0,
        });
        assert_eq!(memory_type(0b111, &types, &PARAM_MEMORY), Some(2));
        assert_eq!(memory_type(0b011, &types, &PARAM_MEMORY), Some(1));
        assert_eq!(memory_type(0b001, &types, &PARAM_MEMORY), None);
    }

    /// Host access to a mapped buffer is bounds-checked against its
    /// mapping: inside it works; past it, or where offset + length
    /// overflows, it is refused naming the sizes (no copy runs). Mutation:
    /// `check` → `Ok(())` (a copy past the mapping) → red.
    #[test]
    fn host_access_past_the_mapping_is_refused() {
        use crate::sys::HOST_COHERENT;
        let Some(gpu) = crate::sys::test_gpu() else {
            return;
        };
        let b = gpu
            .create_buffer(64, &[M::HOST_VISIBLE | HOST_COHERENT])
            .unwrap();
        if !b.is_mapped() {
            return eprintln!("no mappable memory on this device: skipped");
        }
        b.write(0, &[7u8; 64]).unwrap();
        let mut out = [0u8; 64];
        b.read(0, &mut out).unwrap();
        assert_eq!(out, [7u8; 64]);
        let far = 1usize << 40;
        let e = b.write(far, &[0u8; 8]).unwrap_err().to_string();
        assert!(e.contains("8 bytes at 1099511627776 exceed the"), "{e}");
        let e = b
            .read(usize::MAX - 2, &mut out[..4])
            .unwrap_err()
            .to_string();
        assert!(e.contains("exceed the"), "{e}");
    }
}
