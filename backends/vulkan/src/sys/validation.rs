//! Khronos validation as a verdict. With `SEAM_VULKAN_VALIDATION=1` (core
//! validation) or `=sync` (core plus synchronization validation) the instance
//! enables `VK_LAYER_KHRONOS_validation` and registers a `VK_EXT_debug_utils`
//! messenger for warnings and errors. The layer reports synchronously, inside
//! the Vulkan call that broke a rule, on the thread making it; so the
//! messenger keeps each message on that thread, and the backend call that
//! made the Vulkan call collects it ([`take`]) and fails with it.

use ash::vk;
use std::cell::RefCell;
use std::ffi::{c_void, CStr};

/// Which validation `SEAM_VULKAN_VALIDATION` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    Off,
    /// `1`: the layer's core checks (valid usage, `VUID-…`).
    Core,
    /// `sync`: core checks plus synchronization validation (`SYNC-HAZARD-…`).
    Sync,
}

impl Validation {
    /// What a value of `SEAM_VULKAN_VALIDATION` asks for: unset, empty or
    /// `0` nothing, `1` the core checks, `sync` synchronization validation
    /// too; anything else is an error naming the variable (a misspelt value
    /// would otherwise turn validation off while the run says it is on).
    pub fn parse(value: Option<&str>) -> Result<Validation, String> {
        match value {
            None | Some("") | Some("0") => Ok(Validation::Off),
            Some("1") => Ok(Validation::Core),
            Some("sync") => Ok(Validation::Sync),
            Some(v) => Err(format!(
                "SEAM_VULKAN_VALIDATION={v}: expected 1 or sync (or 0, or unset)"
            )),
        }
    }

    /// [`Validation::parse`] of the process's `SEAM_VULKAN_VALIDATION`.
    pub fn from_env() -> Result<Validation, String> {
        Self::parse(std::env::var("SEAM_VULKAN_VALIDATION").ok().as_deref())
    }
}

thread_local! {
    /// Messages raised on this thread and not yet collected.
    static RAISED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The validation messages raised on this thread since the last call, oldest
/// first, each `<message id>: <text>`.
pub fn take() -> Vec<String> {
    RAISED.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the layer passes NUL-terminated strings that live for the
    // duration of the callback, which is where this is called.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The messenger callback: keep the message on this thread. Never unwinds.
pub(super) unsafe extern "system" fn messenger(
    _severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    if data.is_null() {
        return vk::FALSE;
    }
    // SAFETY: the layer passes a valid callback-data struct for the duration
    // of the call (checked non-null above).
    let data = unsafe { &*data };
    let id = text(data.p_message_id_name);
    let message = text(data.p_message).replace('\n', " ");
    let line = if id.is_empty() || message.contains(&id) {
        message
    } else {
        format!("{id}: {message}")
    };
    // `try_with`: during thread teardown the message is dropped, not a panic.
    let _ = RAISED.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            r.push(line);
        }
    });
    // FALSE: the Vulkan call that raised it is not aborted.
    vk::FALSE
}

/// The messenger's create info: warnings and errors of every type.
pub(super) fn messenger_info() -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(messenger))
}

#[cfg(test)]
mod tests {
    use super::Validation;

    /// Each value asks for what it names; a misspelt one is refused with
    /// the variable's name. Mutations: a match arm deleted (`1` or `sync`
    /// silently off) → red.
    #[test]
    fn the_variable_is_read_strictly() {
        for (v, want) in [
            (None, Validation::Off),
            (Some(""), Validation::Off),
            (Some("0"), Validation::Off),
            (Some("1"), Validation::Core),
            (Some("sync"), Validation::Sync),
        ] {
            assert_eq!(Validation::parse(v), Ok(want), "{v:?}");
        }
        let e = Validation::parse(Some("SYNC")).unwrap_err();
        assert!(e.starts_with("SEAM_VULKAN_VALIDATION=SYNC:"), "{e}");
    }
}
