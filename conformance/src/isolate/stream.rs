//! The child's side and the parent's reading of the verdict stream: one JSON
//! line per trial start and finish, a torn last line skipped.

use super::*;
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// One line of the verdict stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamEvent {
    /// A trial is about to run.
    Start { name: String },
    /// A trial finished, with its record as the report will hold it.
    Done(TrialRecord),
    /// The trace logs of the trial that just finished (a traced run), sent
    /// with its verdict so that a later crash loses none of them.
    Trace(Vec<seam::TraceLog>),
}

/// The child side of the verdict stream: appends one line per event, each
/// in a single write, so a crash leaves every earlier line whole. Does
/// nothing when [`STREAM_ENV`] is unset (an in-process run).
pub struct VerdictStream {
    file: Option<std::fs::File>,
}

impl VerdictStream {
    /// The stream the parent asked for, if any.
    pub fn from_env() -> Self {
        match std::env::var_os(STREAM_ENV) {
            None => VerdictStream { file: None },
            Some(path) => Self::to_file(Path::new(&path)).unwrap_or_else(|e| {
                eprintln!(
                    "warning: cannot stream verdicts to {}: {e}",
                    Path::new(&path).display()
                );
                VerdictStream { file: None }
            }),
        }
    }

    pub fn to_file(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(VerdictStream { file: Some(file) })
    }

    pub fn started(&mut self, name: &str) {
        self.emit(&StreamEvent::Start { name: name.into() });
    }

    pub fn finished(&mut self, record: &TrialRecord) {
        self.emit(&StreamEvent::Done(record.clone()));
    }

    /// The trace logs of the trial just finished (none: nothing sent).
    pub fn traced(&mut self, logs: &[seam::TraceLog]) {
        if !logs.is_empty() {
            self.emit(&StreamEvent::Trace(logs.to_vec()));
        }
    }

    fn emit(&mut self, event: &StreamEvent) {
        let Some(file) = &mut self.file else { return };
        if let Ok(mut line) = serde_json::to_string(event) {
            line.push('\n');
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// New complete lines of a file another process appends to.
#[derive(Default)]
pub(super) struct Tail {
    pub(super) offset: u64,
    pub(super) partial: Vec<u8>,
}

impl Tail {
    pub(super) fn lines(&mut self, path: &Path) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        String::from_utf8_lossy(&done)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// What the parent has read of a child's stream.
#[derive(Default)]
pub(super) struct StreamState {
    pub(super) tail: Tail,
    pub(super) done: Vec<TrialRecord>,
    /// The trial started and not yet finished, and when the parent saw it start.
    pub(super) running: Option<(String, Instant)>,
    /// The trace logs the trials sent.
    pub(super) traces: Vec<seam::TraceLog>,
    /// Why some of them did not read back (a trace is said, never dropped).
    pub(super) trace_error: Option<String>,
}

impl StreamState {
    pub(super) fn poll(&mut self, path: &Path) {
        for line in self.tail.lines(path) {
            // A line that does not parse is not ours (or torn): skip it.
            match serde_json::from_str::<StreamEvent>(&line) {
                Ok(StreamEvent::Start { name }) => self.running = Some((name, Instant::now())),
                Ok(StreamEvent::Done(record)) => {
                    if self
                        .running
                        .as_ref()
                        .is_some_and(|(n, _)| *n == record.name)
                    {
                        self.running = None;
                    }
                    self.done.push(record);
                }
                Ok(StreamEvent::Trace(logs)) => self.traces.extend(logs),
                Err(e) if line.starts_with("{\"trace\"") => {
                    self.trace_error.get_or_insert(format!(
                        "a trace line of the device process's verdict stream does not read back: {e}"
                    ));
                }
                Err(_) => {}
            }
        }
    }
}
