//! `cargo test -p seam-conformance`: every case on every discovered device,
//! as libtest trials named `<device>::<case>[::<mode>]`. Devices that are
//! missing give ignored trials whose reason says what to install.

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use seam_conformance::report::Verdict;
use seam_conformance::runner::{self, Filter};

fn main() {
    let args = Arguments::from_args();
    let plan = runner::plan(&Filter::default());
    let trials = plan
        .trials
        .into_iter()
        .map(|t| {
            let kind = t.case.rule.to_string();
            Trial::ignorable_test(t.name.clone(), move || match runner::run(&t).verdict {
                Verdict::Passed => Ok(Completion::Completed),
                Verdict::ExpectedFailure(reason) => Ok(Completion::ignored_with(format!(
                    "expected failure: {reason}"
                ))),
                Verdict::Ignored(reason) => Ok(Completion::ignored_with(reason)),
                Verdict::Failed(m)
                | Verdict::UnexpectedPass(m)
                | Verdict::TimedOut(m)
                | Verdict::Crashed(m)
                | Verdict::TeardownHang(m) => Err(Failed::from(m)),
            })
            .with_kind(kind)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
