//! `cargo xtask report merge` reads JSON written on other machines, so a
//! report is input: truncated, mutated and hostile reports never panic the
//! merge, and are refused with an error naming the file and the field; any
//! report that is accepted renders to a matrix page in which every string is
//! escaped.

use proptest::prelude::*;
use proptest::test_runner::Config;
use seam_conformance::matrix;
use seam_conformance::merge::{self, MergeError, MAX_REPORT_BYTES};
use seam_conformance::report::{
    DeviceRecord, Machine, MissingRecord, Report, ReportError, Summary, TrialRecord, Verdict,
};
use serde_json::Value;
use std::path::PathBuf;

const LABEL: &str = "reports/box-7.json";
const HOSTILE: &str =
    "<script>alert(\"x\")</script> & 'q' \"dq\" </td><img src=x onerror=alert(1)>";

fn trial(device: &str, case: &str, verdict: Verdict, digest: Option<&str>) -> TrialRecord {
    TrialRecord {
        name: format!("{device}::{case}"),
        device: device.into(),
        case: case.split("::").next().unwrap_or(case).into(),
        rule: "C1".into(),
        mode: "eager".into(),
        verdict,
        duration_ms: 1.5,
        digest: digest.map(str::to_string),
    }
}

/// A small report with every kind of field: two devices, a missing
/// backend, every verdict, digests.
fn base() -> Report {
    let trials = vec![
        trial(
            "cpu:0",
            "c1_replay_reexecutes",
            Verdict::Passed,
            Some("00ab"),
        ),
        trial(
            "cpu:0",
            "c2_host_write_seen_by_next_replay",
            Verdict::Failed("1 != 2".into()),
            None,
        ),
        trial(
            "cpu:0",
            "c3_handles_do_not_alias",
            Verdict::Ignored("n/a".into()),
            None,
        ),
        trial(
            "vulkan:0",
            "c1_replay_reexecutes",
            Verdict::Passed,
            Some("00ab"),
        ),
        trial(
            "vulkan:0",
            "c4_eager_and_captured_identical::captured",
            Verdict::ExpectedFailure("known".into()),
            None,
        ),
        trial(
            "vulkan:0",
            "c5_x",
            Verdict::UnexpectedPass("listed".into()),
            None,
        ),
        trial("vulkan:0", "c6_x", Verdict::TimedOut("120 s".into()), None),
        trial(
            "vulkan:0",
            "c7_x",
            Verdict::Crashed("signal 11".into()),
            None,
        ),
        trial(
            "vulkan:0",
            "teardown",
            Verdict::TeardownHang("20 s".into()),
            None,
        ),
        trial(
            "hip:none",
            "c1_replay_reexecutes",
            Verdict::Ignored("no ROCm".into()),
            None,
        ),
    ];
    let mut summary = Summary::default();
    trials.iter().for_each(|t| summary.add(&t.verdict));
    Report {
        format_version: 2,
        seam_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: "0123456789abcdef0123456789abcdef01234567".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        machine: Machine {
            os: "linux".into(),
            arch: "x86_64".into(),
            hostname: "box-7".into(),
            os_pretty: "Debian".into(),
            kernel: "6.1".into(),
            cpu: "cpu".into(),
            label: "box-7".into(),
        },
        devices: ["cpu:0", "vulkan:0"]
            .iter()
            .map(|d| DeviceRecord {
                id: d.to_string(),
                backend: d.split(':').next().unwrap_or_default().into(),
                name: format!("{d} name"),
                driver: "drv 1".into(),
                capture_support: seam::CaptureSupport::Native,
                subnormals: None,
                update_support: None,
                node_timing: None,
                conditional_support: None,
                open_error: None,
            })
            .collect(),
        missing: vec![MissingRecord {
            backend: "hip".into(),
            reason: "no ROCm".into(),
        }],
        trials,
        summary,
        planned: Default::default(),
    }
}

fn base_json() -> String {
    serde_json::to_string_pretty(&base()).unwrap()
}

/// Every node of a JSON value, as a report field path (`trials[3].verdict`)
/// with the JSON pointer that reaches it.
fn nodes(v: &Value, path: String, pointer: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                nodes(x, p, format!("{pointer}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                nodes(x, format!("{path}[{i}]"), format!("{pointer}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push((path, pointer));
}

/// The node a report field path names, if there is one.
fn resolve<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    if field == "(report)" {
        return Some(v);
    }
    let mut at = v;
    for part in field.split('.') {
        let (key, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        at = at.get(key)?;
        for index in indices.split('[').filter(|s| !s.is_empty()) {
            at = at.get(index.trim_end_matches(']').parse::<usize>().ok()?)?;
        }
    }
    Some(at)
}

fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(-1.0)),
        Just(Value::from(1e300)),
        Just(Value::from(u64::MAX)),
        "[a-z<>&\"' \\n\\u{0}\\u{7}\\u{FFFF}\\u{202E}]{0,40}".prop_map(Value::String),
        Just(Value::String(HOSTILE.into())),
        Just(Value::String("x".repeat(10_000))),
        Just(Value::Array(vec![])),
        Just(serde_json::json!([null, 1, "a"])),
        Just(serde_json::json!({})),
        Just(serde_json::json!({"verdict": "passed", "detail": HOSTILE})),
        // The name of another verdict, device or field, to cross-wire them.
        prop_oneof![
            Just("passed"),
            Just("crashed"),
            Just("cpu:0"),
            Just("hip:none"),
            Just("Native")
        ]
        .prop_map(|s| Value::String(s.into())),
    ]
}

/// Refused with the file's name, or accepted; never a panic.
fn check_refusal(text: &str, mutated: Option<&Value>) -> Result<Option<Report>, TestCaseError> {
    match merge::parse(LABEL, text) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.starts_with(LABEL), "{msg}");
            let MergeError::Parse { error, .. } = &e else {
                return Err(TestCaseError::fail(format!("not a parse error: {e:?}")));
            };
            if let (ReportError::Field { field, .. }, Some(doc)) = (error, mutated) {
                prop_assert!(
                    resolve(doc, field).is_some(),
                    "the error names `{field}`, which is not a field of the report: {msg}"
                );
                prop_assert!(msg.contains(&format!("field `{field}`")), "{msg}");
            }
            Ok(None)
        }
    }
}

/// An accepted report merges with a good one and renders without a panic,
/// with every string of the page escaped.
fn render(r: Report) -> Result<(), TestCaseError> {
    let pair = [("good.json".into(), base()), (LABEL.into(), r)];
    // A changed seam_version is refused against the good report, and so is
    // a mutation that changed nothing (the same report twice): alone, it merges.
    let m = match merge::merge(&pair) {
        Err(MergeError::VersionMismatch { .. } | MergeError::Duplicate { .. }) => {
            merge::merge(&pair[1..])
        }
        m => m,
    }
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let _ = matrix::markdown(&m);
    let page = matrix::html(&m);
    if let Err(e) = markup_is_only_ours(&page) {
        return Err(TestCaseError::fail(e));
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config { cases: 256, failure_persistence: None, ..Config::default() })]

    #[test]
    fn truncated_reports_are_refused_naming_the_file(cut in 0usize..10_000) {
        let text = base_json();
        let mut cut = cut % text.len();
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let err = merge::parse(LABEL, &text[..cut]).unwrap_err();
        prop_assert!(
            matches!(&err, MergeError::Parse { error: ReportError::NotJson(_), .. }),
            "{err:?}"
        );
        prop_assert!(err.to_string().starts_with(&format!("{LABEL} is not a seam conformance report: not JSON: ")), "{err}");
    }

    #[test]
    fn mutated_reports_are_refused_naming_the_field_or_render_escaped(
        pick in any::<prop::sample::Index>(),
        value in hostile_value(),
        delete in any::<bool>(),
    ) {
        let mut doc = serde_json::to_value(base()).unwrap();
        let mut all = Vec::new();
        nodes(&doc, String::new(), String::new(), &mut all);
        let (_, pointer) = pick.get(&all).clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", ""));
        match (delete, doc.pointer_mut(parent)) {
            (true, Some(Value::Object(map))) => {
                map.remove(key);
            }
            (true, Some(Value::Array(items))) => {
                if let Ok(i) = key.parse::<usize>() {
                    if i < items.len() {
                        items.remove(i);
                    }
                }
            }
            _ => match doc.pointer_mut(&pointer) {
                Some(node) => *node = value,
                None => doc = value,
            },
        }
        let text = serde_json::to_string(&doc).unwrap();
        if let Some(r) = check_refusal(&text, Some(&doc))? {
            render(r)?;
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}", prefix in 0usize..200) {
        let good = base_json();
        let cut = (0..=prefix.min(good.len())).rev().find(|&i| good.is_char_boundary(i)).unwrap_or(0);
        let spliced = format!("{}{text}", &good[..cut]);
        check_refusal(&text, None)?;
        check_refusal(&spliced, None)?;
    }

    #[test]
    fn hostile_strings_anywhere_are_escaped_in_the_page(s in "[<>&\"'a-z =/]{1,30}", pick in any::<prop::sample::Index>()) {
        let mut doc = serde_json::to_value(base()).unwrap();
        let mut strings = Vec::new();
        nodes(&doc, String::new(), String::new(), &mut strings);
        strings.retain(|(_, p)| doc.pointer(p).is_some_and(Value::is_string));
        let (_, pointer) = pick.get(&strings).clone();
        if let Some(node) = doc.pointer_mut(&pointer) {
            *node = Value::String(format!("{s}{HOSTILE}"));
        }
        let text = serde_json::to_string(&doc).unwrap();
        if let Some(r) = check_refusal(&text, Some(&doc))? {
            render(r)?;
        }
    }
}

/// Every `<` of the page opens one of the page's own tags with only its own
/// attributes, every `&` is an entity, and no `>` or `"` stands loose in
/// text or in an attribute value.
fn markup_is_only_ours(page: &str) -> Result<(), String> {
    const TAGS: &[&str] = &[
        "html", "head", "meta", "title", "style", "body", "h1", "h2", "table", "tr", "th", "td",
        "br", "span", "code", "p", "ul", "li",
    ];
    const ATTRS: &[&str] = &["lang", "charset", "class", "title"];
    let body = page.strip_prefix("<!DOCTYPE html>\n").ok_or("no doctype")?;
    let mut rest = body;
    while let Some(open) = rest.find('<') {
        text_is_escaped(&rest[..open])?;
        let after = &rest[open + 1..];
        let close = after.find('>').ok_or("unclosed tag")?;
        let raw = &after[..close];
        let closing = raw.starts_with('/');
        let tag = raw.strip_prefix('/').unwrap_or(raw);
        let (name, mut attrs) = tag.split_once(' ').unwrap_or((tag, ""));
        if !TAGS.contains(&name) {
            return Err(format!("foreign tag <{tag}>"));
        }
        while !attrs.is_empty() {
            let (attr, value) = attrs
                .split_once("=\"")
                .ok_or(format!("attribute in <{tag}>"))?;
            if !ATTRS.contains(&attr) {
                return Err(format!("foreign attribute {attr} in <{tag}>"));
            }
            let end = value
                .find('"')
                .ok_or(format!("unclosed attribute in <{tag}>"))?;
            text_is_escaped(&value[..end])?;
            attrs = value[end + 1..].trim_start();
        }
        rest = &after[close + 1..];
        // The style sheet is ours and constant.
        if name == "style" && !closing {
            let end = rest.find("</style>").ok_or("unclosed style")?;
            rest = &rest[end..];
        }
    }
    text_is_escaped(rest)
}

fn text_is_escaped(s: &str) -> Result<(), String> {
    if s.contains(['<', '>', '"']) {
        return Err(format!("unescaped markup in {s:?}"));
    }
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        rest = &rest[i + 1..];
        let ok = ["amp;", "lt;", "gt;", "quot;", "apos;"]
            .iter()
            .any(|e| rest.starts_with(e));
        if !ok {
            return Err(format!("a bare & in {s:?}"));
        }
    }
    Ok(())
}

/// Device names, driver strings, machine names, messages, digests and the
/// file's own name holding `<script>`, `&` and quotes: all escaped.
#[test]
fn the_matrix_page_escapes_every_string() {
    let mut r = base();
    r.machine.label = format!("lab {HOSTILE}");
    r.machine.os_pretty = HOSTILE.into();
    r.machine.cpu = HOSTILE.into();
    r.git_commit = HOSTILE.into();
    r.started_at = HOSTILE.into();
    for d in &mut r.devices {
        d.name = format!("GPU {HOSTILE}");
        d.driver = format!("drv {HOSTILE}");
        d.capture_support = seam::CaptureSupport::Unsupported(HOSTILE.into());
    }
    r.missing[0].reason = HOSTILE.into();
    for t in &mut r.trials {
        t.verdict = match &t.verdict {
            Verdict::Passed => Verdict::Passed,
            _ => Verdict::Failed(format!("boom {HOSTILE}")),
        };
        t.digest = t.digest.as_ref().map(|_| HOSTILE.into());
        t.rule = HOSTILE.into();
    }
    let mut summary = Summary::default();
    r.trials.iter().for_each(|t| summary.add(&t.verdict));
    r.summary = summary;
    let label = format!("reports/{HOSTILE}.json");
    let m = merge::merge(&[(label, r)]).unwrap();
    let page = matrix::html(&m);
    markup_is_only_ours(&page).unwrap_or_else(|e| panic!("{e}\n{page}"));
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("<img"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &apos;q&apos;"));
    // Each hostile field made it onto the page (escaped), not dropped.
    assert!(page.matches("&lt;script&gt;").count() >= 10, "{page}");
    // The checker itself catches markup that is not ours.
    assert!(markup_is_only_ours("<!DOCTYPE html>\n<td title=\"a\" onclick=\"x\">").is_err());
    assert!(markup_is_only_ours("<!DOCTYPE html>\n<p>a & b</p>").is_err());
    assert!(markup_is_only_ours("<!DOCTYPE html>\n<p>a</p><script>").is_err());
}

#[test]
fn a_wrong_type_names_the_file_and_the_field() {
    let mut doc = serde_json::to_value(base()).unwrap();
    doc["trials"][1]["duration_ms"] = Value::String("fast".into());
    let e = merge::parse(LABEL, &doc.to_string()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{LABEL} is not a seam conformance report: field `trials[1].duration_ms`: invalid type: string \"fast\", expected f64")
    );
    let mut doc = serde_json::to_value(base()).unwrap();
    doc["devices"][0]["capture_support"] = Value::from(7);
    let e = merge::parse(LABEL, &doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `devices[0].capture_support`: "), "{e}");
    let mut doc = serde_json::to_value(base()).unwrap();
    doc["trials"][2]["verdict"] = Value::String("mostly_passed".into());
    let e = merge::parse(LABEL, &doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `trials[2]`: unknown variant `mostly_passed`"),
        "{e}"
    );
    let mut doc = serde_json::to_value(base()).unwrap();
    doc.as_object_mut().unwrap().remove("trials");
    let e = merge::parse(LABEL, &doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `(report)`: missing field `trials`"),
        "{e}"
    );
    let mut doc = serde_json::to_value(base()).unwrap();
    doc["machine"]["hostname"] = Value::from(5);
    let e = merge::parse(LABEL, &doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `machine.hostname`: "), "{e}");
    let mut doc = serde_json::to_value(base()).unwrap();
    doc["missing"] = serde_json::json!([{"backend": "hip", "reason": 3}]);
    let e = merge::parse(LABEL, &doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `missing[0].reason`: "), "{e}");
    let mut doc = serde_json::to_value(base()).unwrap();
    doc["summary"]["passed"] = Value::from(-1);
    let e = merge::parse(LABEL, &doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `summary.passed`: "), "{e}");
    let e = merge::parse(LABEL, "[1, 2]").unwrap_err().to_string();
    assert!(
        e.ends_with("field `(report)`: expected an object, found an array"),
        "{e}"
    );
}

#[test]
fn an_inconsistent_report_names_the_field() {
    let expect = |r: Report, field: &str, says: &str| {
        let e = merge::parse(LABEL, &serde_json::to_string(&r).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("field `{field}`: {says}")), "{e}");
    };
    let mut r = base();
    r.summary.passed += 1;
    expect(r, "summary", "says `3 passed");
    let mut r = base();
    r.trials[3].device = "cuda:9".into();
    expect(r, "trials[3].device", "`cuda:9` is neither in devices[]");
    let mut r = base();
    r.trials[1].name = r.trials[0].name.clone();
    expect(
        r,
        "trials[1].name",
        "`cpu:0::c1_replay_reexecutes` is listed twice (also trials[0])",
    );
    let mut r = base();
    r.devices[1].id = "cpu:0".into();
    expect(r, "devices[1].id", "`cpu:0` is listed twice");
    let mut r = base();
    r.trials[0].duration_ms = -3.0;
    expect(r, "trials[0].duration_ms", "-3 is not a duration");
    let mut r = base();
    r.format_version = 99;
    expect(r, "format_version", "99 is not a format this build reads");
    // The base itself is well-formed.
    merge::parse(LABEL, &base_json()).unwrap();
}

#[test]
fn deep_nesting_and_huge_files_are_refused_not_overflowed() {
    let deep = "[".repeat(200_000);
    let e = merge::parse(LABEL, &deep).unwrap_err();
    assert!(
        matches!(&e, MergeError::Parse { error: ReportError::NotJson(m), .. } if m.contains("recursion limit")),
        "{e:?}"
    );
    let dir = std::env::temp_dir().join(format!("seam-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("huge.json");
    let f = std::fs::File::create(&path).unwrap();
    // Sparse: no disk or memory spent.
    f.set_len(MAX_REPORT_BYTES + 1).unwrap();
    let e = merge::load(&path).unwrap_err();
    assert!(matches!(e, MergeError::TooLarge { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&path.display().to_string()),
        "{e}"
    );
    let e = merge::load(&dir.join("absent.json")).unwrap_err();
    assert!(matches!(e, MergeError::Read { .. }), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The size limit is inclusive, for a file and for a stream without a
/// length (a pipe): exactly the limit is read (and then refused as no
/// JSON), one byte more is too large. (`load` is `load_within` at
/// `MAX_REPORT_BYTES`; a sparse file past that is refused above.)
#[test]
fn the_size_limit_holds_at_its_edge_for_files_and_pipes() {
    const LIMIT: u64 = 3 << 20;
    let dir = std::env::temp_dir().join(format!("seam-edge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("edge.json");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(LIMIT)
        .unwrap();
    let e = merge::load_within(&path, LIMIT).unwrap_err();
    assert!(matches!(e, MergeError::Parse { .. }), "{e:?}");
    for (len, too_large) in [(LIMIT, false), (LIMIT + 1, true)] {
        let fifo = dir.join(format!("pipe-{len}"));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                let chunk = vec![b' '; 1 << 20];
                let mut left = len;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    if f.write_all(&chunk[..n]).is_err() {
                        break; // the reader stopped at its limit
                    }
                    left -= n as u64;
                }
            })
        };
        let e = merge::load_within(&fifo, LIMIT).unwrap_err();
        writer.join().unwrap();
        assert_eq!(
            matches!(e, MergeError::TooLarge { .. }),
            too_large,
            "{len} bytes through a pipe: {e:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
