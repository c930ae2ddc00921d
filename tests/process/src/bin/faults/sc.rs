//! One scenario's world: its schema, ledger and seeded random choices ([`Sc`]), and the replicas it
//! starts and the faults it sends through them.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::RunRecord;
use slotguard_process_tests::invariants::{self, Exclusion, Report};
use slotguard_process_tests::{Effect, Node, ledger_in, read_ledger, signal};

use crate::harness::Harness;
use crate::util::{GRACE, job_names};

/// SplitMix64: small, seedable, good enough to pick faults.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, scenario: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in scenario.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Rng(h)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(crate) fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi.saturating_sub(lo) + 1))
    }
}

/// One scenario's schema, ledger and random choices.
pub(crate) struct Sc<'h> {
    pub(crate) h: &'h Harness,
    pub(crate) schema: String,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) ledger: PathBuf,
    pub(crate) rng: Rng,
    /// Processes sent `kill -9`, and when (for (e)).
    pub(crate) killed: BTreeMap<u32, DateTime<Utc>>,
    /// Jobs some replica runs at overlap `allow`, from the arguments it was started with (for (e)).
    pub(crate) shared: RefCell<BTreeSet<String>>,
}

impl Sc<'_> {
    /// A fresh world for scenario `name`: schema `sgf_<name>`, a ledger in a temporary directory, and
    /// random choices drawn from the seed and the name.
    pub(crate) fn new<'a>(h: &'a Harness, name: &str) -> Sc<'a> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("sg-faults-{name}-"))
            .tempdir()
            .expect("tempdir");
        let ledger = ledger_in(dir.path());
        Sc {
            h,
            schema: format!("sgf_{name}"),
            dir,
            ledger,
            rng: Rng::new(h.seed, name),
            killed: BTreeMap::new(),
            shared: RefCell::default(),
        }
    }

    pub(crate) fn url_via(&self, port: u16, instance: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{port}/postgres?application_name={}",
            self.app(instance)
        )
    }

    /// The `application_name` of a replica's connections.
    pub(crate) fn app(&self, instance: &str) -> String {
        format!("{}_{instance}", self.schema)
    }

    /// `sg-node`'s arguments: the scenario's namespace, the store (this scenario's schema unless
    /// `extra` names one), the instance and the ledger, then `extra`.
    pub(crate) fn args(&self, instance: &str, port: u16, extra: &[String]) -> Vec<String> {
        let mut v: Vec<String> = vec!["--namespace".into(), self.schema.clone()];
        if !extra.iter().any(|a| a == "--store") {
            v.push("--store".into());
            v.push(format!(
                "postgres:{}#{}",
                self.url_via(port, instance),
                self.schema
            ));
        }
        v.extend([
            "--instance".into(),
            instance.into(),
            "--ledger".into(),
            self.ledger.to_string_lossy().into_owned(),
        ]);
        v.extend(extra.iter().cloned());
        v
    }

    pub(crate) fn launch(&self, instance: &str, port: u16, extra: &[String]) -> Node {
        self.note_shared(extra);
        let node = self.h.node.to_str().expect("utf-8 path");
        Node::spawn(node, &self.args(instance, port, extra))
    }

    /// Remembers the jobs that `sg-node` runs at overlap `allow` under `extra`: job `n` gets entry
    /// `n % len` of `--overlap` (default `skip`); `--guard` is `lock` or `slot`, both exclusive.
    pub(crate) fn note_shared(&self, extra: &[String]) {
        let get = |flag: &str| {
            extra
                .iter()
                .position(|a| a == flag)
                .and_then(|i| extra.get(i + 1))
        };
        let names: Vec<String> = match get("--names") {
            Some(list) => list.split(',').map(str::to_owned).collect(),
            None => job_names(get("--jobs").and_then(|n| n.parse().ok()).unwrap_or(1)),
        };
        let overlaps: Vec<&str> = get("--overlap").map_or("skip", |o| o).split(',').collect();
        for (n, name) in names.into_iter().enumerate() {
            if overlaps[n % overlaps.len()] == "allow" {
                self.shared.borrow_mut().insert(name);
            }
        }
    }

    /// Sends `kill -9` to `pid` and remembers when (read after the signal was sent): the process's
    /// executions end then, for (e).
    pub(crate) fn kill(&mut self, pid: u32) -> DateTime<Utc> {
        signal(pid, "KILL");
        let at = Utc::now();
        self.killed.insert(pid, at);
        at
    }

    /// Starts one replica on the database and waits until it is ready.
    pub(crate) fn spawn(&self, instance: &str, extra: &[String]) -> Node {
        self.spawn_via(instance, self.h.cluster.port(), extra)
    }

    /// Starts one replica connecting to `port` (a proxy) and waits until it is ready.
    pub(crate) fn spawn_via(&self, instance: &str, port: u16, extra: &[String]) -> Node {
        let mut node = self.launch(instance, port, extra);
        node.wait_for("ready", Duration::from_secs(60));
        node
    }

    /// Starts `n` replicas `n0`, `n1`, ... together and waits until all are ready.
    pub(crate) fn spawn_many(&self, n: usize, extra: &[String]) -> Vec<Node> {
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        self.spawn_named(&names, extra)
    }

    /// Starts one replica per instance name together and waits until all are ready.
    pub(crate) fn spawn_named(&self, names: &[String], extra: &[String]) -> Vec<Node> {
        let port = self.h.cluster.port();
        let mut nodes: Vec<Node> = names
            .iter()
            .map(|name| self.launch(name, port, extra))
            .collect();
        for node in &mut nodes {
            node.wait_for("ready", Duration::from_secs(60));
        }
        nodes
    }

    pub(crate) fn backend(&self, pool: u32) -> slotguard_postgres::PgBackend {
        self.backend_on(&self.h.cluster.url(), pool)
    }

    /// This scenario's store on the server at `url` (a cluster of the scenario's own).
    pub(crate) fn backend_on(&self, url: &str, pool: u32) -> slotguard_postgres::PgBackend {
        self.h
            .rt
            .block_on(
                slotguard_postgres::PgBackend::builder(url)
                    .schema(self.schema.clone())
                    .pool_size(pool)
                    .connect(),
            )
            .expect("connect to the cluster")
    }

    /// Every run with its attempts, and the database's clock when they were read.
    pub(crate) fn runs(&self) -> (Vec<RunRecord>, DateTime<Utc>) {
        self.runs_on(&self.h.cluster.url())
    }

    /// [`Sc::runs`] from the server at `url`.
    pub(crate) fn runs_on(&self, url: &str) -> (Vec<RunRecord>, DateTime<Utc>) {
        let backend = self.backend_on(url, 1);
        self.h.rt.block_on(async {
            let runs = backend.runs(None).await.expect("runs");
            let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
                .fetch_one(backend.pool())
                .await
                .expect("now()");
            backend.close().await;
            (runs, now)
        })
    }

    /// Runs the invariant checker on the ledger and the runs table as they are now.
    pub(crate) fn check(
        &self,
        expected: &BTreeSet<(String, String)>,
    ) -> (Report, Vec<RunRecord>, Vec<Effect>) {
        let effects = read_ledger(&self.ledger);
        let (runs, now) = self.runs();
        let report = self.check_with(&effects, &runs, now, expected);
        (report, runs, effects)
    }

    /// (a)-(e) over `effects` and `runs` (read at the database's `now`), with the kills and the
    /// `allow` jobs of this scenario.
    pub(crate) fn check_with(
        &self,
        effects: &[Effect],
        runs: &[RunRecord],
        now: DateTime<Utc>,
        expected: &BTreeSet<(String, String)>,
    ) -> Report {
        let mut report = invariants::check(effects, runs, now, expected, GRACE);
        let exclusion = Exclusion {
            shared: self.shared.borrow().clone(),
            killed: self.killed.clone(),
        };
        invariants::check_overlaps(&mut report, effects, runs, now, &exclusion);
        report
    }

    pub(crate) fn pool(&self) -> sqlx::PgPool {
        let url = format!("{}?application_name=sg-faults", self.h.cluster.url());
        self.h
            .rt
            .block_on(sqlx::PgPool::connect(&url))
            .expect("connect to the cluster")
    }
}
