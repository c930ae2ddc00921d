//! `schededits`: stored schedules changed at run time while replicas fail. Four replicas run one
//! `slot`-level job whose code schedule names no instant of the run; the harness adds three stored
//! schedules of it on partitions of their own (`Admin` over the scenario's schema) and, at seeded
//! instants, flips an expression and back, pauses and resumes one, removes one and adds it again,
//! and skips an upcoming slot of one partition, while it `kill -9`s one replica (started again at
//! once) and `SIGSTOP`s another past the stale threshold, each time the one running job bodies.
//! Checked: (a)-(e) over every row, and [`schedules`] over the versions read back: every slot that
//! ran was due under the version in force at its instant, and every slot the versions produce has a
//! row (the skipped one with the operator's reason, never run).

use slotguard::store::{ScheduleStore, ScheduleVersion};
use slotguard_admin::{Admin, AdminError, ChangeRequest, ScheduleFields};
use slotguard_process_tests::invariants::schedules::{self, OperatorSkip, Window};

use crate::busy::bodies_per_replica;
use crate::prelude::*;

/// The job; its code schedule (`0 0 0 1 1 *`) names no instant of the run.
const JOB: &str = "job000";
/// The replicas.
const REPLICAS: usize = 4;
/// The stored schedules at the start: id, partition, expression.
const SCHEDULES: [(&str, &str, &str); 3] = [
    ("s-acme", "acme", "* * * * * *"),
    ("s-bolt", "bolt", "*/2 * * * * *"),
    ("s-cobalt", "cobalt", "* * * * * *"),
];
/// The window checked ends this long before the replicas are stopped.
const MARGIN_MS: i64 = 3_000;

/// The replicas' arguments: the job at `slot`, overlap `skip`, bodies of 400 ms.
fn node_args() -> Vec<String> {
    with_common(&[
        "--jobs",
        "1",
        "--cron",
        "0 0 0 1 1 *",
        "--guard",
        "slot",
        "--overlap",
        "skip",
        "--work-ms",
        "400",
    ])
}

/// An operator's change.
enum Edit {
    /// Adds schedule `id` on `partition` with `cron` (again, after a removal).
    Add(&'static str, &'static str, &'static str),
    /// Changes schedule `id` as `fields` say; the text names the change.
    Change(&'static str, Box<ScheduleFields>, &'static str),
    /// Removes schedule `id`.
    Remove(&'static str),
    /// Skips an upcoming slot of schedule `id`, 1.5 s ahead or more.
    Skip(&'static str),
}

/// A step of the run.
enum Step {
    Edit(Edit),
    /// `kill -9` the replica running job bodies, and start it again.
    Kill,
    /// `SIGSTOP` the replica running job bodies (not the killed one) for stale + 1-2 s.
    Stop,
    /// `SIGCONT` the stopped replica.
    Cont,
}

fn cron(expr: &str) -> ScheduleFields {
    ScheduleFields {
        cron: Some(expr.to_owned()),
        ..ScheduleFields::default()
    }
}

fn paused(paused: bool, expr: &str) -> ScheduleFields {
    ScheduleFields {
        paused: Some(paused),
        note: Some(paused.then(|| "sg-faults: freeze".to_owned())),
        ..cron(expr)
    }
}

fn change(id: &'static str, fields: ScheduleFields, what: &'static str) -> Step {
    Step::Edit(Edit::Change(id, Box::new(fields), what))
}

/// The steps, each at its share (in %) of the `phase`, plus 0-500 ms (seeded). The kill comes
/// while `acme` (every other second) and `cobalt` run; the stop while `acme` and `bolt` do.
fn plan(sc: &mut Sc, start: DateTime<Utc>, phase_ms: u64) -> Vec<(DateTime<Utc>, Step)> {
    let steps = [
        (10, change("s-acme", cron("*/2 * * * * *"), "flip")),
        (20, change("s-bolt", paused(true, "*/2 * * * * *"), "pause")),
        (30, Step::Kill),
        (40, change("s-bolt", paused(false, "* * * * * *"), "resume")),
        (45, Step::Edit(Edit::Skip("s-acme"))),
        (50, Step::Edit(Edit::Remove("s-cobalt"))),
        (55, Step::Stop),
        (
            70,
            Step::Edit(Edit::Add("s-cobalt", "cobalt", "*/2 * * * * *")),
        ),
        (85, change("s-acme", cron("* * * * * *"), "flip back")),
    ];
    steps
        .into_iter()
        .map(|(share, step)| {
            let offset = Duration::from_millis(phase_ms * share / 100) + sc.rng.ms(0, 500);
            let at = start + chrono::Duration::from_std(offset).expect("small");
            (at, step)
        })
        .collect()
}

/// What the run did, for the checks.
struct Drive {
    admin: Admin,
    pool: sqlx::PgPool,
    nodes: Vec<Node>,
    /// Per replica, the intervals it was down: kill to ready, stop to continue.
    down: Vec<Vec<(DateTime<Utc>, DateTime<Utc>)>>,
    /// The killed processes and when.
    kills: Vec<(u32, DateTime<Utc>)>,
    /// The replica killed, if any yet.
    killed: Option<usize>,
    /// The replica stopped now: index, pid, when.
    stopped: Option<(usize, u32, DateTime<Utc>)>,
    /// What each fault hit: `kill:n2:1` (replica, bodies it ran), `stop:n0:2`.
    faults: Vec<String>,
    /// How many faults found a replica running bodies.
    hit: usize,
    /// How long the stop held.
    held: chrono::Duration,
    /// The changes written, as `id:what@+s`.
    edits: Vec<String>,
    skips: Vec<OperatorSkip>,
}

pub(crate) fn schededits(sc: &mut Sc) -> Outcome {
    let phase_ms = if sc.h.quick { 10_000 } else { 15_000 };
    let mut out = Outcome::new(
        "every change written; the kill or the stop hits a replica running job bodies; every attempt the kill interrupted is taken over by one that runs a body; (a)-(e) over every row; every stored-schedule slot that ran was due under the version in force at its instant; every slot the versions produce from the first version's effect to the end less 3 s has a row and ended succeeded or skipped with a reason, the operator's skip with theirs and never run",
    );
    let nodes = sc.spawn_many(REPLICAS, &node_args());
    let backend = sc.backend(2);
    let mut d = Drive {
        admin: Admin::new(backend.clone()),
        pool: sc.pool(),
        nodes,
        down: vec![Vec::new(); REPLICAS],
        kills: Vec::new(),
        killed: None,
        stopped: None,
        faults: Vec::new(),
        hit: 0,
        held: chrono::Duration::zero(),
        edits: Vec::new(),
        skips: Vec::new(),
    };
    let begun = Utc::now();
    for (id, partition, expr) in SCHEDULES {
        run_edit(sc, &mut out, &mut d, begun, Edit::Add(id, partition, expr));
    }
    // The schedules take effect and run a few slots before the first change.
    let start = Utc::now() + chrono_ms(2_000);
    let steps = plan(sc, start, phase_ms);
    drive(sc, &mut out, &mut d, begun, steps);
    // The last change in force, the stopped replica's runs taken over and its tails ended.
    sleep(Duration::from_millis(STALE_MS) + secs(2));
    let end = Utc::now();
    let Drive { nodes, pool, .. } = &mut d;
    let unclean = stop_all(std::mem::take(nodes));
    sc.h.rt.block_on(pool.close());
    let histories: Vec<Vec<ScheduleVersion>> = sc.h.rt.block_on(async {
        let mut all = Vec::new();
        for (id, ..) in SCHEDULES {
            all.push(backend.schedule_history(id).await.expect("history"));
        }
        backend.close().await;
        all
    });
    check(sc, &mut out, &d, &histories, end);
    out.require_clean(unclean, "replicas");
    out
}

/// Carries out the steps in the order of their instants; a stop adds its continue.
fn drive(
    sc: &mut Sc,
    out: &mut Outcome,
    d: &mut Drive,
    begun: DateTime<Utc>,
    mut steps: Vec<(DateTime<Utc>, Step)>,
) {
    while let Some(next) = (0..steps.len()).min_by_key(|i| steps[*i].0) {
        let (at, step) = steps.remove(next);
        sleep_until(at);
        match step {
            Step::Edit(edit) => run_edit(sc, out, d, begun, edit),
            Step::Kill => kill(sc, d),
            Step::Stop => {
                let until = stop(sc, d);
                steps.push((until, Step::Cont));
            }
            Step::Cont => {
                if let Some((i, pid, at)) = d.stopped.take() {
                    signal(pid, "CONT");
                    let now = Utc::now();
                    d.held = now - at;
                    d.down[i].push((at, now));
                }
            }
        }
    }
}

/// Waits for a whole second plus 150-350 ms (seeded), when the bodies of that second's slots run,
/// and answers the replica (not `except`) running the most of them and how many: the first
/// second in which one runs bodies of two partitions or more, or from the third on, one or more;
/// after four seconds with none, a replica picked at random, running none.
fn target(sc: &mut Sc, d: &Drive, except: Option<usize>) -> (usize, usize) {
    for round in 0..4 {
        let offset = chrono::Duration::from_std(sc.rng.ms(150, 350)).expect("small");
        sleep_until(next_second(Utc::now()) + offset);
        let busy = bodies_per_replica(sc, &d.pool, &d.nodes).unwrap_or_default();
        let most = busy
            .into_iter()
            .filter(|(i, _)| Some(*i) != except)
            .max_by_key(|(_, jobs)| jobs.len());
        match most {
            Some((i, jobs)) if jobs.len() >= 2 || round >= 2 => return (i, jobs.len()),
            _ => {}
        }
    }
    let others: Vec<usize> = (0..d.nodes.len()).filter(|i| Some(*i) != except).collect();
    (others[sc.rng.below(others.len())], 0)
}

/// `kill -9` of the replica running job bodies, started again under its name at once.
fn kill(sc: &mut Sc, d: &mut Drive) {
    let (i, bodies) = target(sc, d, None);
    let pid = d.nodes[i].pid();
    let at = sc.kill(pid);
    d.kills.push((pid, at));
    d.nodes[i] = sc.spawn(&format!("n{i}"), &node_args());
    d.down[i].push((at, Utc::now()));
    d.killed = Some(i);
    d.faults.push(format!("kill:n{i}:{bodies}"));
    d.hit += usize::from(bodies > 0);
}

/// `SIGSTOP` of the replica running job bodies (not the killed one); answers when to let it go
/// on: stale + 1-2 s later (seeded).
fn stop(sc: &mut Sc, d: &mut Drive) -> DateTime<Utc> {
    let (i, bodies) = target(sc, d, d.killed);
    let pid = d.nodes[i].pid();
    signal(pid, "STOP");
    let at = Utc::now();
    d.stopped = Some((i, pid, at));
    d.faults.push(format!("stop:n{i}:{bodies}"));
    d.hit += usize::from(bodies > 0);
    let hold = Duration::from_millis(STALE_MS) + sc.rng.ms(1_000, 2_000);
    at + chrono::Duration::from_std(hold).expect("small")
}

/// Makes one change through `Admin`; a refusal or an error is a failure of the scenario.
fn run_edit(sc: &mut Sc, out: &mut Outcome, d: &mut Drive, begun: DateTime<Utc>, edit: Edit) {
    let after = secs_f(Utc::now() - begun);
    let pick = sc.rng.below(2);
    let admin = d.admin.clone();
    let done = sc.h.rt.block_on(async {
        let by = |what: &str| ChangeRequest::new("sg-faults", format!("schededits: {what}"));
        match edit {
            Edit::Add(id, partition, expr) => {
                let fields = ScheduleFields {
                    job: Some(JOB.to_owned()),
                    tz: Some("UTC".to_owned()),
                    partition: Some(partition.to_owned()),
                    ..cron(expr)
                };
                let s = admin.add_schedule(id, fields, &by("add")).await?;
                Ok((format!("{id}:add v{}", s.version.version), None))
            }
            Edit::Change(id, fields, what) => {
                let latest = admin.schedule(id).await?.version.version;
                let s = admin
                    .change_schedule(id, latest, *fields, &by(what))
                    .await?;
                Ok((format!("{id}:{what} v{}", s.version.version), None))
            }
            Edit::Remove(id) => {
                let v = admin.remove_schedule(id, None, &by("remove")).await?;
                Ok((format!("{id}:remove v{}", v.version), None))
            }
            Edit::Skip(id) => skip(&admin, id, pick, &by("skip")).await,
        }
    });
    match done {
        Ok((what, skip)) => {
            d.edits.push(format!("{what}@+{after}"));
            d.skips.extend(skip);
        }
        Err(e) => out
            .failures
            .push(format!("change at +{after} refused: {e}")),
    }
}

/// Skips the first (`pick` 0) or second upcoming slot of schedule `id` at least 1.5 s ahead.
async fn skip(
    admin: &Admin,
    id: &str,
    pick: usize,
    by: &ChangeRequest,
) -> Result<(String, Option<OperatorSkip>), AdminError> {
    let s = admin.schedule(id).await?;
    let partition = s
        .version
        .spec
        .map(|spec| spec.partition)
        .unwrap_or_default();
    let ahead = Utc::now() + chrono_ms(1_500);
    let slot = s.next.into_iter().filter(|t| *t >= ahead).nth(pick);
    let Some(slot) = slot else {
        return Ok((format!("{id}:skip (no slot ahead)"), None));
    };
    admin.skip(JOB, slot, &partition, by).await?;
    let what = format!("{id}:skip {}", slot.format("%H:%M:%S"));
    let skip = OperatorSkip {
        job: JOB.to_owned(),
        partition,
        slot,
        reason: by.reason.clone(),
    };
    Ok((what, Some(skip)))
}

/// The checks: (a)-(e), the schedules' rules, the faults and the take-overs.
fn check(
    sc: &Sc,
    out: &mut Outcome,
    d: &Drive,
    histories: &[Vec<ScheduleVersion>],
    end: DateTime<Utc>,
) {
    let (report, runs, effects) = sc.check(&BTreeSet::new());
    let window = window(d, histories, end);
    let found = schedules::check_schedules(histories, &runs, &effects, &window, &d.skips);
    let taken = interrupted_by(&d.kills, &runs, &effects);
    let not_run_again = not_run_again(&d.kills, &effects);
    let versions: usize = histories.iter().map(Vec::len).sum();
    out.fig("replicas", REPLICAS);
    out.fig("versions", versions);
    out.fig("edits", d.edits.join(","));
    out.fig("faults", d.faults.join(","));
    out.fig("stop-held", secs_f(d.held));
    out.fig("window", secs_f(window.to - window.from));
    out.fig("all-down", window.excluded.len());
    out.fig("interrupted", taken.count);
    out.fig("taken-over", taken.latencies.len());
    out.fig("taken-over-not-run", not_run_again.len());
    out.fig("skipped-slots", d.skips.len());
    out.figures.push(found.figures());
    out.invariants(&report);
    out.failures.extend(found.violations.iter().cloned());
    out.require(d.skips.len() == 1, || "no slot was skipped".into());
    out.require(d.hit >= 1, || {
        format!(
            "neither fault found a replica running job bodies ({:?})",
            d.faults
        )
    });
    out.require(taken.unrecovered == 0, || {
        format!(
            "{} interrupted attempts never taken over",
            taken.unrecovered
        )
    });
    for slot in &not_run_again {
        out.failures.push(format!(
            "{slot}: interrupted by the kill, and no later attempt started a body"
        ));
    }
    require_settled(out, &found);
}

/// Every slot of the window ended `succeeded` or `skipped`: nothing left abandoned, running or
/// failed after the faults.
fn require_settled(out: &mut Outcome, found: &schedules::ScheduleReport) {
    let unsettled: Vec<String> = found
        .recorded
        .iter()
        .filter(|(status, _)| !matches!(**status, "succeeded" | "skipped"))
        .map(|(status, n)| format!("{n} {status}"))
        .collect();
    out.require(unsettled.is_empty(), || {
        format!(
            "slots of the window ended neither succeeded nor skipped: {}",
            unsettled.join(", ")
        )
    });
}

/// The slots whose execution a kill interrupted and that no later attempt ran (ledger `start`
/// under a higher attempt), as `job slot partition`.
fn not_run_again(kills: &[(u32, DateTime<Utc>)], effects: &[Effect]) -> BTreeSet<String> {
    let killed: BTreeSet<u32> = kills.iter().map(|(pid, _)| *pid).collect();
    let starts = || effects.iter().filter(|e| e.kind == "start");
    let ended: BTreeSet<i64> = effects
        .iter()
        .filter(|e| e.kind != "start")
        .map(|e| e.token)
        .collect();
    starts()
        .filter(|e| killed.contains(&e.pid) && !ended.contains(&e.token))
        .filter(|e| {
            !starts().any(|x| {
                (&x.job, &x.slot, &x.partition) == (&e.job, &e.slot, &e.partition)
                    && x.attempt > e.attempt
            })
        })
        .map(|e| format!("{} {} {}", e.job, e.slot, e.partition))
        .collect()
}

/// The window checked: from the first version's effect to `end` less [`MARGIN_MS`], less the
/// intervals in which every replica was down (and a second either side).
fn window(d: &Drive, histories: &[Vec<ScheduleVersion>], end: DateTime<Utc>) -> Window {
    let from = histories.iter().flatten().map(|v| v.effective_at).min();
    Window {
        from: from.unwrap_or(end),
        to: end - chrono_ms(MARGIN_MS),
        excluded: all_down(&d.down)
            .into_iter()
            .map(|(a, b)| (a - chrono_ms(1_000), b + chrono_ms(1_000)))
            .collect(),
    }
}

/// The intervals in which every replica was down, from each one's own.
fn all_down(down: &[Vec<(DateTime<Utc>, DateTime<Utc>)>]) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let Some((first, rest)) = down.split_first() else {
        return Vec::new();
    };
    rest.iter().fold(first.clone(), |acc, other| {
        acc.iter()
            .flat_map(|(a0, a1)| {
                other.iter().filter_map(move |(b0, b1)| {
                    let (from, to) = (*a0.max(b0), *a1.min(b1));
                    (from < to).then_some((from, to))
                })
            })
            .collect()
    })
}
