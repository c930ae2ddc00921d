//! The shipped Prometheus alert rules (`deploy/prometheus/slotguard.rules.yml`): `promtool` checks
//! them and runs their unit tests (`slotguard.rules.test.yml`), and every metric they read is one the
//! runtime emits and docs/metrics.md lists.

use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus")
}

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `promtool`, which Debian's `prometheus` package installs (`.ci/run` does); outside CI its absence
/// skips the test with a note, in CI it fails it.
fn promtool() -> Option<Command> {
    let found = Command::new("promtool").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is missing: .ci/run installs Debian's prometheus package"
        );
        println!("skipped: no promtool (apt-get install prometheus)");
        return None;
    }
    Some(Command::new("promtool"))
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let Some(mut check) = promtool() else { return };
    let checked = check
        .args(["check", "rules", "slotguard.rules.yml"])
        .current_dir(deploy())
        .output()
        .expect("promtool check");
    let out = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");
    let tested = Command::new("promtool")
        .args(["test", "rules", "slotguard.rules.test.yml"])
        .current_dir(deploy())
        .output()
        .expect("promtool test");
    assert!(
        tested.status.success(),
        "{}{}",
        String::from_utf8_lossy(&tested.stdout),
        String::from_utf8_lossy(&tested.stderr)
    );
}

#[test]
fn every_metric_the_rules_read_is_emitted_and_documented() {
    let rules = read(deploy().join("slotguard.rules.yml"));
    // The expressions only: the runbooks name events too.
    let mut in_expr = false;
    let exprs: String = rules
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            if line.starts_with("expr:") {
                in_expr = true;
            } else if line.starts_with("labels:") || line.starts_with("for:") {
                in_expr = false;
            }
            in_expr
        })
        .collect::<Vec<_>>()
        .join("\n");
    let emitted = read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src/metrics.rs"));
    let documented = read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/metrics.md"));
    let mut names: Vec<&str> = exprs
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("job_") && w.len() > 4 && *w != "job_name")
        .map(|w| w.strip_suffix("_bucket").unwrap_or(w))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        assert!(
            emitted.contains(&format!("\"{name}\"")),
            "{name} is not emitted"
        );
        assert!(
            documented.contains(&format!("`{name}`")),
            "{name} is not in docs/metrics.md"
        );
    }
}
