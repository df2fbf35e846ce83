// Shared by the backends' own device tests (`#[path]`-included): each test
// is a libtest-mimic trial that opens its device, or is *ignored* with the
// reason it could not be opened — never a pass on a machine without one —
// or fails where `SEAM_REQUIRE_DEVICES` names the device.

use libtest_mimic::{Arguments, Completion, Trial};

/// A test body: panics (assert!) to fail, returns `Completion::ignored_with`
/// when the device it got cannot run it.
pub type Body<D> = fn(D) -> Completion;

/// Run `host` (checks that need no device) and `tests` (each on a device
/// from `open`) as libtest trials named `<device>::<name>`, as the suite
/// names its own (so `cargo test -- vulkan:0::` selects both); exits the
/// process. Several filters are taken as libtest takes them.
pub fn run<D: 'static>(
    device: &'static str,
    host: &[(&'static str, fn())],
    open: fn() -> Result<D, String>,
    tests: &[(&'static str, Body<D>)],
) -> ! {
    let (rest, filters) = seam::testing::split_filters(std::env::args());
    let mut args = Arguments::from_iter(rest);
    let host = host.iter().map(|&(name, check)| {
        Trial::test(format!("{device}::{name}"), move || {
            check();
            Ok(())
        })
    });
    let trials = host
        .chain(tests.iter().map(|&(name, body)| {
            Trial::ignorable_test(format!("{device}::{name}"), move || match open() {
                Ok(dev) => Ok(body(dev)),
                Err(why) if seam::testing::is_required(device) => Err(format!(
                    "{} requires {device}, but it did not open: {why}",
                    seam::testing::REQUIRE_ENV
                )
                .into()),
                Err(why) => Ok(Completion::ignored_with(why)),
            })
        }))
        .collect::<Vec<Trial>>();
    // libtest-mimic takes one filter; with more, the trials are chosen
    // here (its `--skip` still applies).
    let (one, trials) = seam::testing::apply_filters(&filters, args.exact, trials, Trial::name);
    args.filter = one;
    libtest_mimic::run(&args, trials).exit()
}
