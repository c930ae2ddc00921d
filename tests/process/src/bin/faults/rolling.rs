//! `rolling`: a rolling restart that changes a job's schedule. Three replicas run v1 of the jobs
//! (`*/2 * * * * *`); one at a time, each is stopped with SIGTERM (graceful) and replaced by a
//! replica running v2 (`*/3 * * * * *`, same job names). The full set rolls back to v1 the same way.
//!
//! What a user should expect (docs/RELIABILITY.md, "rolling"): slots are instants computed by each
//! replica from its own definition, and the slot row deduplicates instants, not schedules. While both
//! versions run, the job runs the **union** of the two schedules, each instant once: v1's slots
//! while any v1 replica is up, v2's while any v2 replica is up. Each row carries the fingerprint of
//! the replica that created it. The `jobs` table holds the definition registered last (each replica
//! registers at start-up), and `Admin::missed` judges any window by that definition.

use slotguard::Schedule;
use slotguard_admin::Admin;

use crate::prelude::*;

/// The two versions of the schedule, and their seconds steps.
const VERSIONS: [(&str, i64); 2] = [("*/2 * * * * *", 2), ("*/3 * * * * *", 3)];
const JOBS: usize = 4;

/// When the replicas of one version ran: each from its launch (it may claim from then) and its
/// `ready` line (it surely claims from then) to the signal that stopped it.
#[derive(Default)]
struct Coverage(Vec<Up>);

struct Up {
    launched: DateTime<Utc>,
    ready: DateTime<Utc>,
    stopped: Option<DateTime<Utc>>,
}

impl Coverage {
    /// Whether a replica surely claimed slots at `at`: up from at least `margin` before to `margin`
    /// after.
    fn surely(&self, at: DateTime<Utc>, margin: chrono::Duration) -> bool {
        self.0
            .iter()
            .any(|u| at - margin >= u.ready && u.stopped.is_none_or(|s| at + margin <= s))
    }

    /// Whether a replica may have claimed slots at `at`: launched no later than `margin` after it and
    /// stopped no earlier than `margin` before it.
    fn possibly(&self, at: DateTime<Utc>, margin: chrono::Duration) -> bool {
        self.0
            .iter()
            .any(|u| at + margin >= u.launched && u.stopped.is_none_or(|s| at - margin <= s))
    }
}

fn fires(version: usize, at: DateTime<Utc>) -> bool {
    at.timestamp().rem_euclid(VERSIONS[version].1) == 0
}

/// The replicas while the versions roll: which version each runs, when each version's were up,
/// and the mixed periods.
struct Fleet {
    coverage: [Coverage; 2],
    /// Each running replica, its version and its index in its version's coverage.
    nodes: Vec<(Node, usize, usize)>,
    /// Each roll's mixed period: from the first new replica ready to the last old one signalled.
    mixed: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// Replicas that did not exit cleanly when stopped.
    unclean: usize,
}

/// The arguments of a replica of `version`.
fn args(version: usize) -> Vec<String> {
    with_common(&[
        "--jobs",
        &JOBS.to_string(),
        "--cron",
        VERSIONS[version].0,
        "--overlap",
        "skip,allow",
        "--work-ms",
        "300",
    ])
}

/// How far inside (surely) or outside (possibly) a replica's time up an instant is judged.
const MARGIN_MS: i64 = 1_000;

pub(crate) fn rolling(sc: &mut Sc) -> Outcome {
    let quick = sc.h.quick;
    // Seconds of v1 alone, then after each replacement, then at the end.
    let (alone, dwell) = if quick { (5, 5) } else { (8, 8) };
    // v1 -> v2, and back in the full set.
    let rolls: &[(usize, usize)] = if quick { &[(0, 1)] } else { &[(0, 1), (1, 0)] };
    let mut out = Outcome::new(
        "while one version runs, each of its slots executed exactly once and no slot of the other; while both run, each slot of either schedule (the union) executed exactly once; every row carries the fingerprint of a version whose schedule has its instant; (a)-(e)",
    );
    let mut fleet = Fleet {
        coverage: [Coverage::default(), Coverage::default()],
        nodes: Vec::new(),
        mixed: Vec::new(),
        unclean: 0,
    };
    let launched = Utc::now();
    let first = sc.spawn_many(3, &args(0));
    let started = Utc::now();
    for (i, node) in first.into_iter().enumerate() {
        fleet.coverage[0].0.push(Up {
            launched,
            ready: started,
            stopped: None,
        });
        fleet.nodes.push((node, 0, i));
    }
    let from = started + chrono_ms(1_000);
    sleep(secs(alone));
    let mut judged_after_roll = (0, 0);
    for (generation, &(old, new)) in rolls.iter().enumerate() {
        fleet.roll(sc, (old, new), generation + 1, dwell, started);
        if generation == 0 {
            judged_after_roll = v1_alone_judged(sc, &fleet.coverage, from, &mut out);
        }
    }
    let end = Utc::now();
    let to = end - chrono_ms(1_000);
    let last_version = fleet.nodes.last().map_or(0, |n| n.1);
    let mut finals = Vec::new();
    for (node, version, index) in fleet.nodes.drain(..) {
        if let Some(c) = fleet.coverage[version].0.get_mut(index) {
            c.stopped = Some(end);
        }
        finals.push(node);
    }
    fleet.unclean += stop_all(finals);
    let first_launch = fleet.coverage[0].0.first().map_or(started, |u| u.launched);
    let (must, may) = instants(&fleet.coverage, (from, to), (first_launch, end));
    let expected = expect(&job_names(JOBS), &must);
    let (report, runs, effects) = sc.check(&expected);
    let judged = judge_rows(&mut out, &runs, &effects, &expected, &may, &fleet.mixed);
    let stored = stored_cron(sc);
    out.require(stored.as_deref() == Some(VERSIONS[last_version].0), || {
        format!("the stored definition is {stored:?}, not the last version registered")
    });
    let mixed_shown: Vec<String> = fleet.mixed.iter().map(|(f, t)| secs_f(*t - *f)).collect();
    out.fig("rolls", rolls.len());
    out.fig("mixed-periods", mixed_shown.join("/"));
    judged.figures(&mut out, expected.len());
    out.fig("stored-cron", format!("{:?}", stored.unwrap_or_default()));
    out.fig(
        "v1-alone-window-listed-by-admin-missed(v2-only-instants-there)",
        format!("{}({})", judged_after_roll.0, judged_after_roll.1),
    );
    out.invariants(&report);
    out.require_clean(fleet.unclean, "replicas");
    out
}

impl Fleet {
    /// One roll from version `old` to `new`: one at a time, each old replica is stopped (SIGTERM)
    /// and a new one started as `g<generation>n<i>`, `dwell` seconds apart.
    fn roll(
        &mut self,
        sc: &Sc,
        (old, new): (usize, usize),
        generation: usize,
        dwell: u64,
        started: DateTime<Utc>,
    ) {
        let mut mixed_from = None;
        let mut mixed_to = started;
        for slot in 0..3 {
            let (node, version, index) = self.nodes.remove(0);
            debug_assert_eq!(version, old);
            node.signal("TERM");
            let stopped = Utc::now();
            mixed_to = stopped;
            if let Some(c) = self.coverage[version].0.get_mut(index) {
                c.stopped = Some(stopped);
            }
            let (_, ok) = node.finish(secs(30));
            self.unclean += usize::from(!ok);
            let name = format!("g{generation}n{slot}");
            let launched = Utc::now();
            let node = sc.spawn(&name, &args(new));
            let ready = Utc::now();
            mixed_from.get_or_insert(ready);
            self.coverage[new].0.push(Up {
                launched,
                ready,
                stopped: None,
            });
            let index = self.coverage[new].0.len() - 1;
            self.nodes.push((node, new, index));
            sleep(secs(dwell));
        }
        if let Some(f) = mixed_from {
            self.mixed.push((f, mixed_to));
        }
    }
}

/// The instants each version's replicas were certainly (1 s inside, within `from..=to`) and
/// possibly (1 s outside, from 2 s before the first launch to 1 s after the end) up for.
fn instants(
    coverage: &[Coverage; 2],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    (first_launch, end): (DateTime<Utc>, DateTime<Utc>),
) -> (Vec<DateTime<Utc>>, BTreeSet<DateTime<Utc>>) {
    let margin = chrono_ms(MARGIN_MS);
    let mut must: Vec<DateTime<Utc>> = Vec::new();
    let mut may: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    let mut t = DateTime::from_timestamp(from.timestamp(), 0).expect("in range");
    while t <= to {
        if (0..2).any(|v| fires(v, t) && coverage[v].surely(t, margin)) {
            must.push(t);
        }
        t += chrono::Duration::seconds(1);
    }
    let mut t = DateTime::from_timestamp(first_launch.timestamp() - 2, 0).expect("in range");
    while t <= end + margin {
        if (0..2).any(|v| fires(v, t) && coverage[v].possibly(t, margin)) {
            may.insert(t);
        }
        t += chrono::Duration::seconds(1);
    }
    (must, may)
}

/// What the rows and executions showed.
#[derive(Default)]
struct Judged {
    not_once: usize,
    spurious: usize,
    wrong_fingerprint: usize,
    /// In the mixed periods: slots of v1 only, v2 only, both.
    kinds: BTreeMap<&'static str, usize>,
    /// Who created the slots of both.
    shared_by: BTreeMap<&'static str, usize>,
}

impl Judged {
    fn figures(&self, out: &mut Outcome, checked: usize) {
        let n = |m: &BTreeMap<&str, usize>, k: &str| m.get(k).copied().unwrap_or(0);
        out.fig(
            "mixed-slots",
            format!(
                "v1-only:{},v2-only:{},both:{}(created-by-v1:{},v2:{})",
                n(&self.kinds, "v1-only"),
                n(&self.kinds, "v2-only"),
                n(&self.kinds, "both"),
                n(&self.shared_by, "v1"),
                n(&self.shared_by, "v2")
            ),
        );
        out.fig("slots-checked", checked);
        out.fig("not-exactly-once", self.not_once);
        out.fig("rows-of-no-running-version", self.spurious);
        out.fig("wrong-fingerprint", self.wrong_fingerprint);
    }
}

/// Each expected slot executed once; each row at an instant some running version had, with the
/// fingerprint of a version firing then, and succeeded if expected.
fn judge_rows(
    out: &mut Outcome,
    runs: &[RunRecord],
    effects: &[Effect],
    expected: &BTreeSet<(String, String)>,
    may: &BTreeSet<DateTime<Utc>>,
    mixed: &[(DateTime<Utc>, DateTime<Utc>)],
) -> Judged {
    let fingerprints: Vec<u64> = VERSIONS
        .iter()
        .map(|(cron, _)| {
            Schedule::parse(cron, "UTC")
                .expect("a schedule")
                .fingerprint()
        })
        .collect();
    let margin = chrono_ms(MARGIN_MS);
    let executions = slotguard_process_tests::executions(effects);
    let mut j = Judged::default();
    for key in expected {
        let n = executions.get(key).copied().unwrap_or(0);
        if n != 1 {
            j.not_once += 1;
            out.failures.push(format!("{key:?}: executed {n} times"));
        }
    }
    for run in runs {
        let at = run.key.scheduled_at;
        let key = (run.key.job.clone(), slot_name(at));
        if !may.contains(&at) {
            j.spurious += 1;
            out.failures.push(format!(
                "({}, {}): a row for an instant no running version had",
                key.0, key.1
            ));
        }
        let owner = fingerprints.iter().position(|f| *f == run.fingerprint);
        if !owner.is_some_and(|v| fires(v, at)) {
            j.wrong_fingerprint += 1;
            out.failures.push(format!(
                "({}, {}): fingerprint {:016x} of no version firing then",
                key.0, key.1, run.fingerprint
            ));
        }
        if mixed
            .iter()
            .any(|(f, t)| at >= *f + margin && at <= *t - margin)
        {
            let kind = match (fires(0, at), fires(1, at)) {
                (true, true) => {
                    let by = if owner == Some(0) { "v1" } else { "v2" };
                    *j.shared_by.entry(by).or_insert(0) += 1;
                    "both"
                }
                (true, false) => "v1-only",
                _ => "v2-only",
            };
            *j.kinds.entry(kind).or_insert(0) += 1;
        }
        if run.status != RunStatus::Succeeded && expected.contains(&key) {
            out.failures.push(format!(
                "({}, {}): ended {} ({:?})",
                key.0, key.1, run.status, run.error_message
            ));
        }
    }
    j
}

/// The stored definition is the one registered last, and the admin API judges by it: its cron.
fn stored_cron(sc: &Sc) -> Option<String> {
    let backend = sc.backend(1);
    let admin = Admin::new(backend.clone());
    let first = job_names(1).remove(0);
    let stored =
        sc.h.rt
            .block_on(admin.jobs())
            .ok()
            .and_then(|jobs| jobs.into_iter().find(|j| j.record.definition.name == first))
            .map(|j| j.record.definition.cron);
    sc.h.rt.block_on(backend.close());
    stored
}

/// After the roll to v2: what `Admin::missed` lists over the window where v1 ran alone (it judges by
/// the stored definition, v2's now), and how many v2-only instants that window has.
fn v1_alone_judged(
    sc: &Sc,
    coverage: &[Coverage; 2],
    from: DateTime<Utc>,
    out: &mut Outcome,
) -> (usize, usize) {
    let margin = chrono_ms(MARGIN_MS);
    let names = job_names(JOBS);
    let backend = sc.backend(1);
    let admin = Admin::new(backend.clone());
    let v1_alone_to = coverage[1].0.first().map_or(from, |c| c.launched) - margin;
    let mut judged = 0;
    for job in &names {
        match sc.h.rt.block_on(admin.missed(job, from, v1_alone_to)) {
            Ok(m) => judged += m.len(),
            Err(e) => out.failures.push(format!("Admin::missed({job}): {e}")),
        }
    }
    sc.h.rt.block_on(backend.close());
    let mut v2_only = 0;
    let mut t = DateTime::from_timestamp(from.timestamp(), 0).expect("in range");
    while t < v1_alone_to {
        if t >= from && fires(1, t) && !fires(0, t) {
            v2_only += names.len();
        }
        t += chrono::Duration::seconds(1);
    }
    (judged, v2_only)
}
