//! The harness around the scenarios: the command line, which scenarios to run, the throwaway cluster,
//! running one scenario (a panic is a failure, not an abort) and the result lines.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::Parser;
use slotguard_process_tests::Cluster;
use slotguard_process_tests::invariants::Report;

use crate::sc::Sc;
use crate::table::{SCENARIOS, Scenario};

#[derive(Parser, Debug)]
#[command(
    name = "sg-faults",
    about = "Fault-injection harness: replica processes against a throwaway PostgreSQL cluster"
)]
pub(crate) struct Cli {
    /// A scenario, a comma-separated list of them, or `all` (with `--quick`: those of the CI subset).
    #[arg(long, default_value = "all")]
    pub(crate) scenario: String,
    /// Seeds every random choice.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Smaller sizes (the CI subset).
    #[arg(long)]
    pub(crate) quick: bool,
    /// Replicas in `race` (the other scenarios use 2 or 3).
    #[arg(long, default_value_t = 8)]
    pub(crate) replicas: usize,
    /// The `sg-node` binary (default: next to this one; built first when run through cargo).
    #[arg(long)]
    pub(crate) node: Option<PathBuf>,
    /// Lists the scenarios and exits.
    #[arg(long)]
    pub(crate) list: bool,
}

/// What every scenario shares: the cluster, the runtime that talks to it, the replica binary and
/// the command line's settings.
pub(crate) struct Harness {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) cluster: Cluster,
    pub(crate) node: PathBuf,
    pub(crate) quick: bool,
    pub(crate) replicas: usize,
    pub(crate) seed: u64,
}

/// What a scenario measured and whether it passed.
pub(crate) struct Outcome {
    pub(crate) figures: Vec<String>,
    pub(crate) condition: String,
    pub(crate) failures: Vec<String>,
    /// What a scenario reports without requiring it (printed after the failures, as `note:`).
    pub(crate) notes: Vec<String>,
}

impl Outcome {
    pub(crate) fn new(condition: &str) -> Outcome {
        Outcome {
            figures: Vec::new(),
            condition: condition.to_owned(),
            failures: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(crate) fn fig(&mut self, name: &str, value: impl std::fmt::Display) {
        self.figures.push(format!("{name}={value}"));
    }

    pub(crate) fn require(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    /// Requires every one of `what` (replicas, processes) to have exited cleanly when stopped.
    pub(crate) fn require_clean(&mut self, unclean: usize, what: &str) {
        self.require(unclean == 0, || {
            format!("{unclean} {what} exited uncleanly")
        });
    }

    pub(crate) fn invariants(&mut self, report: &Report) {
        self.figures.push(report.figures());
        self.failures.extend(report.violations.iter().cloned());
    }
}

/// `--list`: one line per scenario, those outside the CI subset marked.
pub(crate) fn list() {
    for s in SCENARIOS {
        let full = if s.quick { "" } else { " (not in --quick)" };
        println!("{:<10} {}{full}", s.name, s.what);
    }
}

/// The scenarios `--scenario` names, in the table's order for `all`; the unknown name as the error.
pub(crate) fn select(wanted: &str, quick: bool) -> Result<Vec<&'static Scenario>, String> {
    if wanted == "all" {
        return Ok(SCENARIOS.iter().filter(|s| s.quick || !quick).collect());
    }
    wanted
        .split(',')
        .map(str::trim)
        .map(|name| {
            SCENARIOS
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| name.to_owned())
        })
        .collect()
}

/// `sg-node` next to this binary; rebuilt first when this one was started by cargo.
pub(crate) fn find_node() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let dir = exe.parent().ok_or("no directory for this binary")?;
    let node = dir.join("sg-node");
    if let Ok(cargo) = std::env::var("CARGO") {
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "--bin", "sg-node", "--manifest-path"]);
        build.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
        if dir.file_name().is_some_and(|d| d == "release") {
            build.arg("--release");
        }
        let status = build.status().map_err(|e| format!("cargo build: {e}"))?;
        if !status.success() {
            return Err("cargo build --bin sg-node failed".into());
        }
    }
    if node.exists() {
        Ok(node)
    } else {
        Err(format!(
            "{} not found: build it (cargo build -p slotguard-process-tests --bins) or pass --node",
            node.display()
        ))
    }
}

/// The throwaway cluster, or why there is none.
pub(crate) fn start_cluster() -> Result<Cluster, String> {
    match std::panic::catch_unwind(Cluster::start) {
        Ok(Some(cluster)) => Ok(cluster),
        Ok(None) => Err(
            "cannot start a throwaway PostgreSQL cluster: no initdb under /usr/lib/postgresql/*/bin"
                .into(),
        ),
        Err(_) => Err(
            "cannot start a throwaway PostgreSQL cluster: initdb or pg_ctl failed (see above)"
                .into(),
        ),
    }
}

/// Runs `scenario` in a schema, ledger and random stream of its own, and prints its result line and
/// violations; answers whether it passed.
pub(crate) fn run(h: &Harness, scenario: &Scenario) -> bool {
    let name = scenario.name;
    let t = Instant::now();
    let outcome =
        std::panic::catch_unwind(AssertUnwindSafe(|| (scenario.run)(&mut Sc::new(h, name))))
            .unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".into());
                let mut o = Outcome::new("the scenario runs to the end");
                o.failures.push(format!("panicked: {message}"));
                o
            });
    let pass = outcome.failures.is_empty();
    println!(
        "RESULT {name} | {} | pass if: {} | {} | {:.1}s",
        outcome.figures.join(" "),
        outcome.condition,
        if pass { "PASS" } else { "FAIL" },
        t.elapsed().as_secs_f64()
    );
    print_capped(name, "", &outcome.failures);
    print_capped(name, "note: ", &outcome.notes);
    pass
}

/// The first 20 of `lines`, each as `    <name>: <prefix><line>`, then how many more there were.
fn print_capped(name: &str, prefix: &str, lines: &[String]) {
    for line in lines.iter().take(20) {
        println!("    {name}: {prefix}{line}");
    }
    if lines.len() > 20 {
        println!("    {name}: {prefix}... {} more", lines.len() - 20);
    }
}

/// The last line: how many ran and which failed; the exit code that goes with it.
pub(crate) fn summary(ran: usize, failed: &[&str], started: Instant) -> ExitCode {
    println!(
        "sg-faults: {ran} scenarios, {} failed{}, {:.1}s in all",
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" ({})", failed.join(","))
        },
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
