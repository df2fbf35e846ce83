// Shared by the backends' own device tests (`#[path]`-included): each test
// is a libtest-mimic trial that opens its device, or is *ignored* with the
// reason it could not be opened — never a pass on a machine without one.

use libtest_mimic::{Arguments, Completion, Trial};

/// A test body: panics (assert!) to fail, returns `Completion::ignored_with`
/// when the device it got cannot run it.
pub type Body<D> = fn(D) -> Completion;

/// Run `host` (checks that need no device) and `tests` (each on a device
/// from `open`) as libtest trials; exits the process.
pub fn run<D: 'static>(
    host: &[(&'static str, fn())],
    open: fn() -> Result<D, String>,
    tests: &[(&'static str, Body<D>)],
) -> ! {
    let args = Arguments::from_args();
    let host = host.iter().map(|&(name, check)| {
        Trial::test(name, move || {
            check();
            Ok(())
        })
    });
    let trials = host
        .chain(tests.iter().map(|&(name, body)| {
            Trial::ignorable_test(name, move || {
                Ok(match open() {
                    Ok(dev) => body(dev),
                    Err(why) => Completion::ignored_with(why),
                })
            })
        }))
        .collect();
    libtest_mimic::run(&args, trials).exit()
}
