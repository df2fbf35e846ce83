//! wgpu validation as a verdict. `InstanceFlags::VALIDATION`
//! (`WGPU_VALIDATION=1`, or on by default in debug builds) makes wgpu-hal
//! enable the backend's validation layer (Vulkan: `VK_LAYER_KHRONOS_validation`
//! with a debug-utils messenger), but wgpu-hal only *logs* what the layer
//! reports, through the `log` crate, and wgpu's error scopes never see it.
//!
//! With `SEAM_WGPU_VALIDATION=1` the backend installs a [`log::Log`] that
//! keeps the messenger's warnings and errors (target `wgpu_hal::vulkan…`)
//! on the thread that logged them. The layer reports synchronously, inside
//! the Vulkan call that broke a rule, and wgpu-core makes its Vulkan calls
//! on the calling thread, so the seam call that made the wgpu call collects
//! them ([`take`]) and fails with them (`Gpu::checked`, `Gpu::wait`); a
//! message raised after a device's last call fails its teardown, and so
//! does any message the device's calls returned (a case may have swallowed
//! the error). Asked for and impossible (another `log` logger is installed,
//! or the layer is missing), discovery says so instead of running
//! unvalidated.

use std::cell::RefCell;
use std::sync::OnceLock;

/// The variable that turns the collector on.
pub const ENV: &str = "SEAM_WGPU_VALIDATION";

/// Whether `SEAM_WGPU_VALIDATION=1`.
pub fn requested() -> bool {
    std::env::var(ENV).is_ok_and(|v| v == "1")
}

thread_local! {
    /// Messages raised on this thread and not yet collected.
    static RAISED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The validation messages raised on this thread since the last call,
/// oldest first.
pub fn take() -> Vec<String> {
    RAISED.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// What wgpu-hal logs when `VALIDATION` is asked for and the layer is not
/// there (at debug level, while the instance is created).
const LAYER_MISSING: &str = "unable to find layer";

/// Whether a log record is a validation message: the Vulkan messenger
/// callback's warnings and errors (`"<types> [<id> (0x…)]\n\t<message>"`),
/// and the lines it logs after one (queue, command buffer and object
/// labels, each starting with a tab).
pub fn is_validation(target: &str, level: log::Level, text: &str) -> Option<Kind> {
    if !target.starts_with("wgpu_hal::vulkan") || level > log::Level::Warn {
        return None;
    }
    if text.starts_with('\t') {
        return Some(Kind::Continuation);
    }
    let (types, rest) = text.split_once(" [")?;
    let types_ok = !types.is_empty()
        && types.split(" | ").all(|t| {
            matches!(
                t,
                "GENERAL" | "VALIDATION" | "PERFORMANCE" | "DEVICE_ADDRESS_BINDING_EXT"
            )
        });
    (types_ok && rest.contains(']')).then_some(Kind::Message)
}

/// A validation record: a new message, or a line belonging to the last one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Message,
    Continuation,
}

/// `"<types> [<id> (0x…)]\n\t<message>"` on one line: `<id>: <message>`.
pub fn one_line(text: &str) -> String {
    let text = text.trim();
    let Some((_, rest)) = text.split_once(" [") else {
        return text.replace(['\n', '\t'], " ");
    };
    let (head, message) = rest.split_once(']').unwrap_or((rest, ""));
    let id = head.split(" (0x").next().unwrap_or(head).trim();
    let message = message.replace(['\n', '\t'], " ");
    let message = message.trim();
    if id.is_empty() || message.contains(id) {
        message.to_string()
    } else {
        format!("{id}: {message}")
    }
}

/// Record one log record on this thread, if it is a validation message.
fn record(target: &str, level: log::Level, text: &str) {
    let Some(kind) = is_validation(target, level, text) else {
        return;
    };
    // `try_with`: during thread teardown the message is dropped, not a panic.
    let _ = RAISED.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else {
            return;
        };
        match (kind, r.last_mut()) {
            (Kind::Continuation, Some(last)) => {
                last.push_str(" | ");
                last.push_str(text.trim());
            }
            (Kind::Continuation, None) => {}
            (Kind::Message, _) => r.push(one_line(text)),
        }
    });
}

struct Collector;

/// Set while the instance is created, if wgpu-hal said the layer is missing.
static LAYER_MISSING_SEEN: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

impl log::Log for Collector {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("wgpu_hal::vulkan")
    }

    fn log(&self, rec: &log::Record<'_>) {
        if !self.enabled(rec.metadata()) {
            return;
        }
        let text = rec.args().to_string();
        if rec.level() == log::Level::Debug && text.contains(LAYER_MISSING) {
            LAYER_MISSING_SEEN.store(true, std::sync::atomic::Ordering::Release);
        }
        record(rec.target(), rec.level(), &text);
    }

    fn flush(&self) {}
}

static COLLECTOR: Collector = Collector;

/// Install the collector (once per process). `Err` if another logger was
/// installed first: then nothing would see wgpu-hal's messages.
pub fn install() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            log::set_logger(&COLLECTOR).map_err(|_| {
                format!(
                    "{ENV}=1 but another `log` logger is installed in this process, so wgpu-hal's validation messages cannot be collected"
                )
            })?;
            log::set_max_level(log::LevelFilter::Warn);
            Ok(())
        })
        .clone()
}

/// The instance flags of a validated instance: `VALIDATION` forced on.
/// `DEBUG` (on in debug builds) makes naga write WGSL debug info into the
/// SPIR-V: `OpSource` language 10 (WGSL), which the spirv-val inside
/// Debian's layer (1.3.239) refuses ("Invalid source language operand: 10",
/// UNASSIGNED-CoreValidation-Shader-InconsistentSpirv) on every pipeline;
/// so it is off unless `WGPU_DEBUG` asks for it (`debug_asked`).
fn validated_flags(flags: wgpu::InstanceFlags, debug_asked: bool) -> wgpu::InstanceFlags {
    let mut flags = flags | wgpu::InstanceFlags::VALIDATION;
    if !debug_asked {
        flags.remove(wgpu::InstanceFlags::DEBUG);
    }
    flags
}

/// Create the instance with validation collected: the collector is
/// installed first (wgpu-hal picks the messenger's severities from
/// `log::max_level()` when the instance is created), `VALIDATION` is forced
/// on, and a missing layer is an error naming what to install. Messages the
/// loader raised while creating the instance are an error too.
pub fn instance(mut desc: wgpu::InstanceDescriptor) -> Result<wgpu::Instance, String> {
    install()?;
    desc.flags = validated_flags(desc.flags, std::env::var_os("WGPU_DEBUG").is_some());
    // Debug while the instance is created, so the "layer missing" line is
    // seen; the messenger then also carries verbose and info messages,
    // which `log` drops below Warn.
    log::set_max_level(log::LevelFilter::Debug);
    let instance = wgpu::Instance::new(desc);
    log::set_max_level(log::LevelFilter::Warn);
    // The instance is only really made when adapters are first enumerated
    // on some wgpu versions: do it here, inside the check.
    let _ = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let raised = take();
    if LAYER_MISSING_SEEN.load(std::sync::atomic::Ordering::Acquire) {
        return Err(format!(
            "{ENV}=1 but VK_LAYER_KHRONOS_validation is not installed (apt-get install vulkan-validationlayers)"
        ));
    }
    if !raised.is_empty() {
        return Err(format!(
            "wgpu::Instance::new: validation: {}",
            raised.join(" | ")
        ));
    }
    Ok(instance)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What wgpu-hal's messenger callback logs, as it formats it.
    const VUID: &str = "VALIDATION [VUID-vkCmdDispatch-None-02697 (0x3b4d0d52)]\n\tValidation Error: [ VUID-vkCmdDispatch-None-02697 ] vkCmdDispatch(): the pipeline layout is incompatible";

    /// Record a message as wgpu-hal's messenger callback logs it.
    pub fn raise(id: &str) {
        record(
            "wgpu_hal::vulkan::instance",
            log::Level::Error,
            &format!("VALIDATION [{id} (0x1)]\n\tValidation Error: [ {id} ] raised by a test"),
        );
    }

    /// Mutations: accept any target, or drop continuation lines → red.
    pub fn collector_keeps_validation_messages_on_their_thread() {
        check(collector())
    }

    pub fn message_kinds_are_read_from_the_callback_format() {
        check(kinds())
    }

    /// A validated instance has `VALIDATION` whatever it was given, keeps
    /// the other flags, and `DEBUG` only where asked. Mutations: `|` →
    /// `&` / `^`, the `DEBUG` removal dropped or made unconditional → red.
    pub fn validated_instances_validate_without_debug_info() {
        use wgpu::InstanceFlags as F;
        assert_eq!(validated_flags(F::empty(), false), F::VALIDATION);
        assert_eq!(validated_flags(F::VALIDATION, false), F::VALIDATION);
        assert_eq!(
            validated_flags(F::DEBUG | F::GPU_BASED_VALIDATION, false),
            F::VALIDATION | F::GPU_BASED_VALIDATION
        );
        assert_eq!(validated_flags(F::DEBUG, true), F::VALIDATION | F::DEBUG);
    }

    /// Validation is off unless `SEAM_WGPU_VALIDATION=1` asks: checked
    /// again in a child process of this test binary with the variable
    /// unset, then set to `0`. Mutation: `requested` → `true` → red.
    pub fn validation_is_off_unless_asked() {
        const CHILD: &str = "SEAM_WGPU_TEST_VALIDATION_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let value = std::env::var(ENV);
            assert!(!requested(), "validation requested with {ENV} = {value:?}");
            return;
        }
        for value in [None, Some("0")] {
            let mut child = std::process::Command::new(std::env::current_exe().expect("this test"));
            child
                .args([
                    "--exact",
                    "wgpu:0::validation::validation_is_off_unless_asked",
                ])
                .env(CHILD, "1");
            match value {
                None => child.env_remove(ENV),
                Some(v) => child.env(ENV, v),
            };
            let out = child.output().expect("the child runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "{ENV} = {value:?}: {}\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// The line wgpu-hal logs at Debug when the layer is missing is seen;
    /// another Debug line, or that text at Info, is not. Mutations: `&&`
    /// → `||`, `==` → `!=` in `Collector::log` → red.
    pub fn collector_sees_a_missing_layer() {
        use std::sync::atomic::Ordering::SeqCst;
        // The instance is made first: it is the one reader of the flag.
        let _ = crate::instance();
        install().expect("no other logger in this process");
        let level = log::max_level();
        log::set_max_level(log::LevelFilter::Trace);
        let t = "wgpu_hal::vulkan::instance";
        LAYER_MISSING_SEEN.store(false, SeqCst);
        log::debug!(target: t, "Instance::new: layer VK_LAYER_x found");
        log::info!(target: t, "{LAYER_MISSING} VK_LAYER_KHRONOS_validation");
        let before = LAYER_MISSING_SEEN.load(SeqCst);
        log::debug!(target: t, "{LAYER_MISSING} VK_LAYER_KHRONOS_validation");
        let after = LAYER_MISSING_SEEN.swap(false, SeqCst);
        log::set_max_level(level);
        let _ = take();
        assert!(!before, "seen in another line");
        assert!(after, "not seen in wgpu-hal's line");
    }

    /// What wgpu-hal logs reaches the collector through `log`: its
    /// messenger's validation messages are kept, another crate's are not.
    /// Mutations: `Collector::log` → `()`, `enabled` → `false` → red.
    pub fn collector_takes_what_wgpu_hal_logs() {
        install().expect("no other logger in this process");
        let _ = take();
        log::error!(target: "wgpu_hal::vulkan::instance", "{VUID}");
        log::error!(target: "wgpu_core::device", "{VUID}");
        let got = take();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("Validation Error: [ VUID-vkCmdDispatch-None-02697 ]"),
            "{got:?}"
        );
    }

    fn check(r: Result<(), String>) {
        if let Err(e) = r {
            panic!("{e}");
        }
    }

    fn collector() -> Result<(), String> {
        let _ = take();
        record("wgpu_hal::vulkan::instance", log::Level::Error, VUID);
        record(
            "wgpu_hal::vulkan::instance",
            log::Level::Error,
            "\tobjects: (type: PIPELINE, hndl: 0x1, name: ?)",
        );
        // Not validation: another target, a level below Warn, a HAL warning
        // that is not the messenger's.
        record("wgpu_core::device", log::Level::Error, VUID);
        record("wgpu_hal::vulkan::instance", log::Level::Info, VUID);
        record(
            "wgpu_hal::vulkan::adapter",
            log::Level::Warn,
            "Unrecognized device ID",
        );
        let other = std::thread::spawn(|| {
            record("wgpu_hal::vulkan::instance", log::Level::Warn, VUID);
            take().len()
        })
        .join()
        .unwrap();
        let got = take();
        if other != 1 {
            return Err(format!("the other thread kept {other} messages, want 1"));
        }
        // The id is not repeated where the message already names it.
        let want = "Validation Error: [ VUID-vkCmdDispatch-None-02697 ] vkCmdDispatch(): the pipeline layout is incompatible | objects: (type: PIPELINE, hndl: 0x1, name: ?)";
        if got != vec![want.to_string()] {
            return Err(format!("got {got:?}, want [{want:?}]"));
        }
        if !take().is_empty() {
            return Err("take() does not clear".into());
        }
        let plain = one_line("PERFORMANCE [UNASSIGNED-BestPractices (0x2)]\n\tuse fewer barriers");
        if plain != "UNASSIGNED-BestPractices: use fewer barriers" {
            return Err(format!("one_line: {plain:?}"));
        }
        Ok(())
    }

    fn kinds() -> Result<(), String> {
        let t = "wgpu_hal::vulkan::instance";
        let cases = [
            (VUID, Some(Kind::Message)),
            (
                "GENERAL | VALIDATION [Loader Message (0x0)]\n\tx",
                Some(Kind::Message),
            ),
            ("PERFORMANCE [id (0x1)]\n\ty", Some(Kind::Message)),
            ("\tqueues: q", Some(Kind::Continuation)),
            ("enumerate_adapters: ERROR_INITIALIZATION_FAILED", None),
            ("Adapter [x] is not conformant", None),
        ];
        for (text, want) in cases {
            let got = is_validation(t, log::Level::Warn, text);
            if got != want {
                return Err(format!("{text:?}: {got:?}, want {want:?}"));
            }
        }
        Ok(())
    }
}
