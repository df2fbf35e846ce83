//! A fake cargo-mutants (and a fake cargo for the baselines xtask runs)
//! that records how it was called and answers what a test set.

use super::super::Options;
use crate::root;
use std::path::{Path, PathBuf};

/// Write `script` to `path`, executable.
fn executable(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A fake cargo-mutants in its own folder: `--list` prints `list.json`;
/// a run appends its arguments to `args.txt`, writes `outcomes.json` as
/// the run's outcomes and exits with `code.txt`.
pub(super) struct Fake {
    pub(super) dir: PathBuf,
}

impl Fake {
    pub(super) fn new(name: &str) -> Fake {
        let dir = root()
            .join("target/xtask-tests")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let script = format!(
            "#!/bin/sh\n\
             case \" $* \" in\n\
             *' --list '*) cat '{d}/list.json' ;;\n\
             *) printf '%s\\n' \"env CARGO_INCREMENTAL=$CARGO_INCREMENTAL\" \"$@\" >> '{d}/args.txt'; echo --- >> '{d}/args.txt'\n\
                out=''; prev=''\n\
                for a in \"$@\"; do [ \"$prev\" = --output ] && out=\"$a\"; prev=\"$a\"; done\n\
                mkdir -p \"$out/mutants.out\"\n\
                cp '{d}/outcomes.json' \"$out/mutants.out/outcomes.json\"\n\
                exit $(cat '{d}/code.txt') ;;\n\
             esac\n"
        );
        executable(&dir.join("cargo-mutants"), &script);
        let fake = Fake { dir };
        fake.exits(0);
        fake
    }

    pub(super) fn program(&self) -> PathBuf {
        self.dir.join("cargo-mutants")
    }

    /// A fake cargo for the baselines xtask runs: appends its arguments to
    /// `cargo.txt` and exits with `cargo-code.txt` (0 when missing).
    pub(super) fn cargo(&self) -> PathBuf {
        let d = self.dir.display();
        let path = self.dir.join("cargo");
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{d}/cargo.txt'\n\
             exit $(cat '{d}/cargo-code.txt' 2>/dev/null || echo 0)\n"
        );
        executable(&path, &script);
        path
    }

    pub(super) fn lists(&self, mutants: &[(&str, &str)]) {
        let list: Vec<serde_json::Value> = mutants
            .iter()
            .map(|(name, file)| serde_json::json!({ "name": name, "file": file }))
            .collect();
        std::fs::write(
            self.dir.join("list.json"),
            serde_json::to_string(&list).unwrap(),
        )
        .unwrap();
    }

    /// The next run's outcomes: (name, file, summary).
    pub(super) fn finds(&self, outcomes: &[(&str, &str, &str)]) {
        let list: Vec<serde_json::Value> = std::iter::once(serde_json::json!({
            "scenario": "Baseline", "summary": "Success"
        }))
        .chain(outcomes.iter().map(|(name, file, summary)| {
            serde_json::json!({
                "scenario": { "Mutant": { "name": name, "file": file } },
                "summary": summary,
            })
        }))
        .collect();
        let v = serde_json::json!({
            "outcomes": list,
            "start_time": "2026-01-01T00:00:00Z",
            "end_time": "2026-01-01T01:00:00Z",
        });
        std::fs::write(self.dir.join("outcomes.json"), v.to_string()).unwrap();
    }

    pub(super) fn exits(&self, code: i32) {
        std::fs::write(self.dir.join("code.txt"), code.to_string()).unwrap();
    }

    /// Each run's arguments.
    pub(super) fn runs(&self) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(self.dir.join("args.txt")).unwrap_or_default();
        text.split("---\n")
            .filter(|r| !r.is_empty())
            .map(|r| r.lines().map(str::to_string).collect())
            .collect()
    }

    pub(super) fn options(&self, group: &str) -> Options {
        Options {
            groups: vec![group.into()],
            files: Vec::new(),
            in_diff: None,
            max: 20,
            in_place: false,
            output: self.dir.join("out"),
            from: None,
            record: false,
            rerun_missed: false,
            jobs: 1,
            kept: self.dir.join("kept"),
            cargo: self.cargo(),
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
