//! README's "Using it" block, compiled in a function returning
//! `seam::Result<()>` and run on the CPU reference. A test compares the
//! README's text with the body below, so the README cannot drift from code
//! that compiles (it once needed `Box<dyn Error>`: opening a device returned
//! a bare `ErrorKind`).

use seam::{ops, Device};

fn using_it() -> seam::Result<()> {
    // README: begin
    let dev: Device = seam_backends::discover().devices[0].device()?;
    let a = dev.buffer_from(&[17.0f32])?;
    let dst = dev.buffer_from(&[0.0f32])?;

    let scope = dev.capture()?; // aborts on drop unless ended
    dev.launch(&ops::add(a.id(), dst.id(), dst.id(), 1))?;
    let graph = scope.end_graph()?; // destroyed on drop

    graph.replay()?; // dst = 17
    graph.replay()?; // dst = 34: a replay re-executes, it never replays a snapshot (C1)
    a.write(&[1.0])?;
    graph.replay()?; // dst = 35: host writes between replays are seen (C2)
    assert_eq!(dst.read()?, vec![35.0]);
    // README: end
    Ok(())
}

#[test]
fn readme_block_runs() {
    using_it().unwrap();
}

/// The README's ```rust block under "## Using it" is this file's block,
/// line for line (leading whitespace and comment spacing aside).
#[test]
fn readme_block_is_this_code() {
    let norm = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = include_str!("../../README.md");
    let section = readme
        .split("## Using it")
        .nth(1)
        .expect("README has a \"## Using it\" section");
    let block = section
        .split("```rust")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a ```rust block");
    let this = include_str!("readme_using_it.rs");
    let body = this
        .split("// README: begin")
        .nth(1)
        .and_then(|b| b.split("// README: end").next())
        .expect("markers");
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .map(norm)
            .filter(|l| !l.is_empty() && !l.starts_with("use "))
            .collect()
    };
    assert_eq!(
        lines(block),
        lines(body),
        "README's block differs from this test"
    );
}
