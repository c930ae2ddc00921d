//! The messages a user sees for a mistake in `#[scheduled]` are part of the product: each case in
//! `tests/ui/` pins its compiler output in a `.stderr` file next to it. Regenerate them with
//! `TRYBUILD=overwrite cargo test -p slotguard-macros --test ui`, then read every changed file.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass.rs");
    let mut failing: Vec<_> = std::fs::read_dir("tests/ui")
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .filter(|path| !path.ends_with("pass.rs"))
        .collect();
    failing.sort();
    for case in failing {
        cases.compile_fail(case);
    }
}
