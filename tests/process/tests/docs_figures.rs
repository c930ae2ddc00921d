//! The fault harness's figures that the README and docs/RELIABILITY.md state agree with the harness
//! and with each other (issue 21, point 8): the number of scenarios is the number the CI subset runs,
//! and the full set has one timing, the same in both.

use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The scenarios the CI subset runs: those the harness's one table marks quick.
fn scenarios() -> usize {
    read("tests/process/src/bin/faults/table.rs")
        .matches("quick: true")
        .count()
}

/// Every number written just before ` scenarios` in `text`.
fn counts(text: &str) -> Vec<usize> {
    text.split(" scenarios")
        .filter_map(|before| before.rsplit([' ', '(']).next()?.parse().ok())
        .collect()
}

/// The timing of the full set: the figure after "full set" up to the next ` s` or `minutes`.
fn full_set_timing(text: &str) -> Vec<String> {
    text.split("the full set")
        .skip(1)
        .filter_map(|after| {
            let window: String = after.chars().take(200).collect();
            let at = window.find(" s ")?;
            let figure = window[..at].rsplit([' ', '(']).next()?;
            figure.parse::<u32>().ok().map(|s| format!("{s} s"))
        })
        .collect()
}

#[test]
fn the_readme_and_reliability_state_the_harness_as_it_is() {
    let n = scenarios();
    let readme = read("README.md");
    let reliability = read("docs/RELIABILITY.md");
    let commands = reliability
        .split("```text")
        .nth(1)
        .and_then(|block| block.split("```").next())
        .expect("the commands block");
    for (doc, text) in [("README.md", readme.as_str()), ("RELIABILITY.md", commands)] {
        let found = counts(text);
        assert!(!found.is_empty(), "{doc} states no scenario count");
        assert!(
            found.iter().all(|c| *c == n),
            "{doc}: {found:?}, the harness has {n}"
        );
    }
    let (a, b) = (full_set_timing(&readme), full_set_timing(commands));
    assert_eq!(a.len(), 1, "README: one timing of the full set: {a:?}");
    assert_eq!(a, b, "README and RELIABILITY.md time the full set alike");
}
