//! What the example tests share: finding (and if needed building) a compiled example.

use std::path::PathBuf;
use std::process::Command;

/// The path of a compiled example, built first if this test run did not build it (or built it before
/// its source last changed).
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/examples-<hash> → target/<profile>/examples/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("{name}.rs"));
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&path).is_none() || modified(&path) < modified(&source) {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "-p", "slotguard-examples", "--example", name]);
        match profile_dir.file_name().and_then(|p| p.to_str()) {
            Some("debug") | None => {}
            Some(profile) => {
                cargo.args(["--profile", profile]);
            }
        }
        let status = cargo.status().expect("cargo runs");
        assert!(status.success(), "cargo build --example {name} failed");
    }
    assert!(
        path.exists(),
        "example {name} not found at {}",
        path.display()
    );
    path
}
