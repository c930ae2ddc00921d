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

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use slotguard::Schedule;
use slotguard::admin::Admin;
use slotguard::store::RunStatus;
use slotguard_process_tests::Node;
use slotguard_process_tests::invariants::{expect, slot_name};

use super::{Outcome, Sc, chrono_ms, job_names, secs, sleep, with_common};

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

pub(super) fn rolling(sc: &mut Sc) -> Outcome {
    let quick = sc.h.quick;
    // Seconds of v1 alone, then after each replacement, then at the end.
    let (alone, dwell) = if quick { (5, 5) } else { (8, 8) };
    // v1 -> v2, and back in the full set.
    let rolls: &[(usize, usize)] = if quick { &[(0, 1)] } else { &[(0, 1), (1, 0)] };
    let mut out = Outcome::new(
        "while one version runs, each of its slots executed exactly once and no slot of the other; while both run, each slot of either schedule (the union) executed exactly once; every row carries the fingerprint of a version whose schedule has its instant; (a)-(e)",
    );
    let args = |version: usize| {
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
    };
    let fingerprints: Vec<u64> = VERSIONS
        .iter()
        .map(|(cron, _)| {
            Schedule::parse(cron, "UTC")
                .expect("a schedule")
                .fingerprint()
        })
        .collect();

    let mut coverage = [Coverage::default(), Coverage::default()];
    let mut nodes: Vec<(Node, usize, usize)> = Vec::new();
    let launched = Utc::now();
    let mut first = sc.spawn_many(3, &args(0));
    let started = Utc::now();
    for (i, node) in first.drain(..).enumerate() {
        coverage[0].0.push(Up {
            launched,
            ready: started,
            stopped: None,
        });
        nodes.push((node, 0, i));
    }
    let from = started + chrono_ms(1_000);
    sleep(secs(alone));
    // Each roll's mixed period: from the first new replica ready to the last old one signalled.
    let mut mixed: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    let mut unclean = 0;
    let mut generation = 0;
    let margin = chrono_ms(1_000);
    let mut judged_after_roll = (0, 0);
    for &(old, new) in rolls {
        generation += 1;
        let mut mixed_from = None;
        let mut mixed_to = started;
        for slot in 0..3 {
            let (node, version, index) = nodes.remove(0);
            debug_assert_eq!(version, old);
            node.signal("TERM");
            let stopped = Utc::now();
            mixed_to = stopped;
            if let Some(c) = coverage[version].0.get_mut(index) {
                c.stopped = Some(stopped);
            }
            let (_, ok) = node.finish(secs(30));
            unclean += usize::from(!ok);
            let name = format!("g{generation}n{slot}");
            let launched = Utc::now();
            let node = sc.spawn(&name, &args(new));
            let ready = Utc::now();
            mixed_from.get_or_insert(ready);
            coverage[new].0.push(Up {
                launched,
                ready,
                stopped: None,
            });
            let index = coverage[new].0.len() - 1;
            nodes.push((node, new, index));
            sleep(secs(dwell));
        }
        if let Some(f) = mixed_from {
            mixed.push((f, mixed_to));
        }
        if generation == 1 {
            judged_after_roll = v1_alone_judged(sc, &coverage, from, margin, &mut out);
        }
    }
    let end = Utc::now();
    let to = end - chrono_ms(1_000);
    let last_version = nodes.last().map_or(0, |n| n.1);
    let mut finals = Vec::new();
    for (node, version, index) in nodes {
        if let Some(c) = coverage[version].0.get_mut(index) {
            c.stopped = Some(end);
        }
        finals.push(node);
    }
    unclean += super::stop_all(finals);

    // The instants each version's replicas were certainly (1 s inside) and possibly (1 s outside)
    // up for.
    let names = job_names(JOBS);
    let mut must: Vec<DateTime<Utc>> = Vec::new();
    let mut may: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    let mut t = DateTime::from_timestamp(from.timestamp(), 0).expect("in range");
    while t <= to {
        if (0..2).any(|v| fires(v, t) && coverage[v].surely(t, margin)) {
            must.push(t);
        }
        t += chrono::Duration::seconds(1);
    }
    let first_launch = coverage[0].0.first().map_or(started, |u| u.launched);
    let mut t = DateTime::from_timestamp(first_launch.timestamp() - 2, 0).expect("in range");
    while t <= end + margin {
        if (0..2).any(|v| fires(v, t) && coverage[v].possibly(t, margin)) {
            may.insert(t);
        }
        t += chrono::Duration::seconds(1);
    }
    let expected = expect(&names, &must);
    let (report, runs, effects) = sc.check(&expected);
    let executions = slotguard_process_tests::executions(&effects);

    let (mut not_once, mut spurious, mut wrong_fingerprint) = (0, 0, 0);
    for key in &expected {
        if executions.get(key).copied().unwrap_or(0) != 1 {
            not_once += 1;
            out.failures.push(format!(
                "{key:?}: executed {} times",
                executions.get(key).copied().unwrap_or(0)
            ));
        }
    }
    // Per mixed period: slots of v1 only, v2 only, both; and who created the shared ones.
    let mut shared_by: BTreeMap<&str, usize> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &runs {
        let at = run.key.scheduled_at;
        if !may.contains(&at) {
            spurious += 1;
            out.failures.push(format!(
                "({}, {}): a row for an instant no running version had",
                run.key.job,
                slot_name(at)
            ));
        }
        let owner = fingerprints.iter().position(|f| *f == run.fingerprint);
        if !owner.is_some_and(|v| fires(v, at)) {
            wrong_fingerprint += 1;
            out.failures.push(format!(
                "({}, {}): fingerprint {:016x} of no version firing then",
                run.key.job,
                slot_name(at),
                run.fingerprint
            ));
        }
        if mixed
            .iter()
            .any(|(f, t)| at >= *f + margin && at <= *t - margin)
        {
            let kind = match (fires(0, at), fires(1, at)) {
                (true, true) => {
                    *shared_by
                        .entry(if owner == Some(0) { "v1" } else { "v2" })
                        .or_insert(0) += 1;
                    "both"
                }
                (true, false) => "v1-only",
                _ => "v2-only",
            };
            *kinds.entry(kind).or_insert(0) += 1;
        }
        if run.status != RunStatus::Succeeded
            && expected.contains(&(run.key.job.clone(), slot_name(at)))
        {
            out.failures.push(format!(
                "({}, {}): ended {} ({:?})",
                run.key.job,
                slot_name(at),
                run.status,
                run.error_message
            ));
        }
    }

    // The stored definition is the one registered last, and the admin API judges by it.
    let backend = sc.backend(1);
    let admin = Admin::new(backend.clone());
    let stored =
        sc.h.rt
            .block_on(admin.jobs())
            .ok()
            .and_then(|jobs| {
                jobs.into_iter()
                    .find(|j| j.record.definition.name == names[0])
            })
            .map(|j| j.record.definition.cron);
    sc.h.rt.block_on(backend.close());
    out.require(stored.as_deref() == Some(VERSIONS[last_version].0), || {
        format!("the stored definition is {stored:?}, not the last version registered")
    });

    let mixed_shown: Vec<String> = mixed.iter().map(|(f, t)| super::secs_f(*t - *f)).collect();
    out.fig("rolls", rolls.len());
    out.fig("mixed-periods", mixed_shown.join("/"));
    out.fig(
        "mixed-slots",
        format!(
            "v1-only:{},v2-only:{},both:{}(created-by-v1:{},v2:{})",
            kinds.get("v1-only").unwrap_or(&0),
            kinds.get("v2-only").unwrap_or(&0),
            kinds.get("both").unwrap_or(&0),
            shared_by.get("v1").unwrap_or(&0),
            shared_by.get("v2").unwrap_or(&0)
        ),
    );
    out.fig("slots-checked", expected.len());
    out.fig("not-exactly-once", not_once);
    out.fig("rows-of-no-running-version", spurious);
    out.fig("wrong-fingerprint", wrong_fingerprint);
    out.fig("stored-cron", format!("{:?}", stored.unwrap_or_default()));
    out.fig(
        "v1-alone-window-listed-by-admin-missed(v2-only-instants-there)",
        format!("{}({})", judged_after_roll.0, judged_after_roll.1),
    );
    out.invariants(&report);
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

/// After the roll to v2: what `Admin::missed` lists over the window where v1 ran alone (it judges by
/// the stored definition, v2's now), and how many v2-only instants that window has.
fn v1_alone_judged(
    sc: &Sc,
    coverage: &[Coverage; 2],
    from: DateTime<Utc>,
    margin: chrono::Duration,
    out: &mut Outcome,
) -> (usize, usize) {
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
