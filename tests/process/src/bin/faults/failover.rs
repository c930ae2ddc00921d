//! `failoversync` and `failoverasync`: the primary crashes (`kill -9` of its postmaster) while job
//! bodies run; 250 ms later its streaming standby is promoted and the proxy the replicas connect
//! through is moved to it. Three replicas on the busy set-up (5 jobs every second at `slot`,
//! overlap `skip`, stale 3 s) with bodies of 800 ms, on a primary and standby of the scenario's
//! own ([`Pair`]). The crash comes 550-750 ms into a second, while that second's bodies run and
//! shortly before the next second's claims.
//!
//! - `failoversync`: synchronous replication. Nothing acknowledged is lost, so (a)-(e) hold over
//!   every slot of the run, and no slot's body completes twice.
//! - `failoverasync`: asynchronous replication with the standby's WAL held back for the last 3 s
//!   before the crash, so the promoted server lacks the last rows, completions and sequence values.
//!   Slots of those seconds may have no row or run twice: that is reported, not required. Required:
//!   no fencing token granted twice, no completion accepted for another slot's body, every replica
//!   running slots again, and (a)-(e) outside [crash - 3.5 s, promotion + stale + 2 s].

use slotguard_process_tests::invariants::failover::{
    TokenSpan, foreign_completions, tokens_granted_twice,
};

use crate::busy::{BUSY_JOBS, BUSY_STALE_MS, busy_args};
use crate::pair::{Failover, Pair, Replication};
use crate::prelude::*;

/// The bodies' work: the crash, aimed late in it, leaves the next second's claims to wait for
/// the promoted server.
const WORK_MS: u64 = 800;
/// The replicas.
const INSTANCES: [&str; 3] = ["n0", "n1", "n2"];
/// How long before the crash the standby's WAL is held back (asynchronous replication).
const LAG_MS: i64 = 3_000;
/// How long the replicas run on after the promotion.
const AFTER: Duration = Duration::from_secs(10);

/// What a failover run left behind.
struct Ran {
    f: Failover,
    /// From 1 s after every replica was ready to 1 s before they were stopped.
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    effects: Vec<Effect>,
    /// The runs table as the promoted server holds it.
    runs: Vec<RunRecord>,
    /// The promoted server's clock when `runs` was read.
    now: DateTime<Utc>,
    unclean: usize,
}

impl Ran {
    /// The `(job, slot)` pairs of every slot of the run.
    fn expected(&self) -> BTreeSet<(String, String)> {
        expect(&job_names(BUSY_JOBS), &every(self.from, self.to, 1))
    }
}

/// The failover to a synchronous standby: what it must keep is everything (see the module).
pub(crate) fn failoversync(sc: &mut Sc) -> Outcome {
    let mut out = Outcome::new(
        "synchronous standby; kill -9 of the primary's postmaster while bodies run, the standby promoted 250 ms later and the replicas' proxy moved to it; bodies were running at the crash; every replica runs slots again after the promotion; no fencing token granted twice; every accepted completion came from a body of its own slot; no slot's body completed twice; (a)-(e) over every slot of the run",
    );
    let ran = run_failover(sc, Replication::Sync, &mut out);
    common(&mut out, &ran);
    lost_with_the_lag(&mut out, &ran);
    let twice = completed_twice(&ran.effects);
    out.require(twice.is_empty(), || {
        format!("{} slots' bodies completed twice: {twice:?}", twice.len())
    });
    let report = sc.check_with(&ran.effects, &ran.runs, ran.now, &ran.expected());
    out.invariants(&report);
    out
}

/// The failover to an asynchronous standby 3 s behind: promises (1)-(4) of the module.
pub(crate) fn failoverasync(sc: &mut Sc) -> Outcome {
    let mut out = Outcome::new(
        "asynchronous standby held 3 s behind, then the same failover; bodies were running at the crash; (1) no fencing token granted twice; (2) every accepted completion came from a body of its own slot; (3) every replica runs slots again after the promotion; (4) (a)-(e) over the slots outside [crash - 3.5 s, promotion + stale 3 s + 2 s]; rows lost with the lag, slots run twice and overlaps across the failover are reported",
    );
    let ran = run_failover(sc, Replication::Async, &mut out);
    common(&mut out, &ran);
    lost_with_the_lag(&mut out, &ran);
    let whole = sc.check_with(&ran.effects, &ran.runs, ran.now, &ran.expected());
    let report = outside_the_window(sc, &mut out, &ran);
    out.fig(
        "overlaps-across-failover",
        whole.overlapping.saturating_sub(report.overlapping),
    );
    out.fig("whole-run-violations", whole.violations.len());
    // The slots without a row are noted already: the other findings first.
    let (no_row, other): (Vec<&String>, Vec<&String>) =
        whole.violations.iter().partition(|v| v.contains("no row"));
    out.notes.extend(
        (other.into_iter().chain(no_row))
            .map(|v| format!("whole run, reported (not required): {v}")),
    );
    out.invariants(&report);
    out
}

/// (a)-(e) over the slots outside [crash - 3.5 s, promotion + stale + 2 s]: the seconds of the
/// lag and of the take-overs that follow the promotion left out.
fn outside_the_window(sc: &Sc, out: &mut Outcome, ran: &Ran) -> Report {
    let (a, b) = (
        ran.f.killed - chrono_ms(3_500),
        ran.f.promoted + chrono_ms(BUSY_STALE_MS as i64 + 2_000),
    );
    out.fig("window", format!("{}..{}", hms(a), hms(b)));
    let (effects, runs) = outside(&ran.effects, &ran.runs, a, b);
    let expected: BTreeSet<_> = (ran.expected().into_iter())
        .filter(|(_, slot)| slot_at(slot).is_some_and(|t| t < a || t > b))
        .collect();
    sc.check_with(&effects, &runs, ran.now, &expected)
}

/// The primary and standby, three replicas through the front proxy; the crash aimed at a whole
/// second 7 s on plus 550-750 ms (that second's bodies run), the WAL held back 3 s before it under
/// `Async`; the replicas run on for [`AFTER`], are stopped, and the promoted server's runs read.
fn run_failover(sc: &mut Sc, replication: Replication, out: &mut Outcome) -> Ran {
    let mut pair = Pair::start(sc, replication);
    let args = busy_args(WORK_MS);
    let mut nodes: Vec<Node> = (INSTANCES.iter())
        .map(|name| sc.launch(name, pair.port(), &args))
        .collect();
    for node in &mut nodes {
        node.wait_for("ready", secs(60));
    }
    let from = Utc::now() + chrono_ms(1_000);
    let offset = chrono::Duration::from_std(sc.rng.ms(550, 750)).expect("small");
    let aim = next_second(Utc::now() + chrono_ms(7_000)) + offset;
    if replication == Replication::Async {
        sleep_until(aim - chrono_ms(LAG_MS));
        pair.hold_wal();
        out.fig("wal-held-before-crash", secs_f(aim - Utc::now()));
    }
    sleep_until(aim);
    let f = pair.fail_over();
    sleep(AFTER);
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let (runs, now) = sc.runs_on(&pair.standby.url());
    Ran {
        f,
        from,
        to,
        effects: read_ledger(&sc.ledger),
        runs,
        now,
        unclean,
    }
}

/// What both scenarios measure and require: bodies running at the crash, the outage, the first
/// runs after it, every replica running again, tokens granted once, completions of their own
/// slot's body.
fn common(out: &mut Outcome, ran: &Ran) {
    let f = &ran.f;
    let running = running_at(&ran.effects, f.killed);
    out.fig("bodies-running-at-crash", running);
    out.fig("outage", secs_f(f.retargeted - f.killed));
    out.fig(
        "promotion-took",
        secs_f(f.promoted - f.killed - chrono_ms(250)),
    );
    outage_waits(out, ran);
    let first = starts_after(&ran.effects, f.promoted).map(|e| e.at);
    out.fig(
        "promotion-to-first-run",
        first
            .min()
            .flatten()
            .map_or("never".into(), |t| secs_f(t - f.promoted)),
    );
    let span = TokenSpan::of(&ran.effects, f.killed, f.promoted);
    out.fig("tokens-max-before/min-after", span.figure());
    out.fig("tokens-after-not-above-max-before", span.not_above);
    out.require(running > 0, || "no body was running at the crash".into());
    for name in INSTANCES {
        let again = starts_after(&ran.effects, f.promoted).any(|e| e.instance == name);
        out.require(again, || format!("{name} ran no slot after the promotion"));
    }
    note_unfinished(out, &ran.runs);
    let twice = tokens_granted_twice(&ran.effects, &ran.runs);
    let foreign = foreign_completions(&ran.effects, &ran.runs);
    out.fig("tokens-granted-twice", twice.len());
    out.fig("foreign-completions", foreign.len());
    out.failures.extend(twice);
    out.failures.extend(foreign);
    out.require_clean(ran.unclean, "replicas");
}

/// One note per row that ended neither `succeeded` nor `skipped`, with its message.
fn note_unfinished(out: &mut Outcome, runs: &[RunRecord]) {
    out.notes.extend(
        (runs.iter())
            .filter(|r| !matches!(r.status, RunStatus::Succeeded | RunStatus::Skipped))
            .map(|r| {
                let message = r.error_message.as_deref().unwrap_or("-");
                let (job, at) = (&r.key.job, hms(r.key.scheduled_at));
                format!(
                    "{job}@{at} ended {} at attempt {}: {message}",
                    r.status, r.attempt
                )
            }),
    );
}

/// The ledger's `start`s after `t`.
fn starts_after(effects: &[Effect], t: DateTime<Utc>) -> impl Iterator<Item = &Effect> {
    effects
        .iter()
        .filter(move |e| e.kind == "start" && e.at.is_some_and(|at| at > t))
}

/// Bodies running at `t`: started by then, with no line ending them (same token and process) by
/// then.
fn running_at(effects: &[Effect], t: DateTime<Utc>) -> usize {
    let by_t = |e: &&Effect| e.at.is_some_and(|at| at <= t);
    effects
        .iter()
        .filter(|e| e.kind == "start")
        .filter(by_t)
        .filter(|s| {
            !effects
                .iter()
                .filter(by_t)
                .any(|e| e.kind != "start" && e.token == s.token && e.pid == s.pid)
        })
        .count()
}

/// What waited across the outage: the slots that fell due between the crash and the front
/// proxy's move, how many have a row (their claim waited and landed on the promoted server) and
/// the longest wait from a slot's instant to its row; and the bodies that ended before the move
/// whose completion the promoted server accepted.
fn outage_waits(out: &mut Outcome, ran: &Ran) {
    let f = &ran.f;
    let rows = index(&ran.runs);
    let slots = expect(&job_names(BUSY_JOBS), &every(f.killed, f.retargeted, 1));
    let waits: Vec<chrono::Duration> = (slots.iter())
        .filter_map(|k| rows.get(k))
        .map(|r| r.created_at - r.key.scheduled_at)
        .collect();
    // By slot and token: a token handed out again names another slot's attempt.
    let accepted: BTreeSet<(String, String, i64)> = (ran.runs.iter())
        .flat_map(|r| r.attempts.iter().map(move |a| (r, a)))
        .filter(|(_, a)| a.status == RunStatus::Succeeded)
        .filter(|(_, a)| a.finished_at.is_some_and(|t| t >= f.retargeted))
        .map(|(r, a)| (r.key.job.clone(), slot_name(r.key.scheduled_at), a.token))
        .collect();
    let completions = (ran.effects.iter())
        .filter(|e| e.kind == "end" && e.at.is_some_and(|t| t < f.retargeted))
        .filter(|e| accepted.contains(&(e.job.clone(), e.slot.clone(), e.token)))
        .count();
    out.fig(
        "claims-waited-across-outage",
        format!("{}/{}", waits.len(), slots.len()),
    );
    out.fig(
        "longest-claim-wait",
        waits.iter().max().map_or("-".into(), |w| secs_f(*w)),
    );
    out.fig("completions-waited-across-outage", completions);
}

/// The figures of what a lagging standby loses (none of it under synchronous replication): how
/// far behind the promoted server was at the crash (the newest write of the old primary it has),
/// the slots that ran with no row, those run before the crash and again after the promotion, and
/// those whose body completed twice; the slots as notes.
fn lost_with_the_lag(out: &mut Outcome, ran: &Ran) {
    let f = &ran.f;
    out.fig(
        "standby-behind-at-crash",
        newest_write(&ran.runs, f.killed).map_or("-".into(), |t| secs_f(f.killed - t)),
    );
    let rows = index(&ran.runs);
    let ran_without_row: BTreeSet<(&str, &str)> = (ran.effects.iter())
        .filter(|e| e.kind == "start")
        .filter(|e| !rows.contains_key(&(e.job.clone(), e.slot.clone())))
        .map(|e| (e.job.as_str(), e.slot.as_str()))
        .collect();
    let before: BTreeSet<(&str, &str)> = (ran.effects.iter())
        .filter(|e| e.kind == "start" && e.at.is_some_and(|t| t < f.killed))
        .map(|e| (e.job.as_str(), e.slot.as_str()))
        .collect();
    let again: BTreeSet<(&str, &str)> = starts_after(&ran.effects, f.promoted)
        .map(|e| (e.job.as_str(), e.slot.as_str()))
        .filter(|k| before.contains(k))
        .collect();
    let twice = completed_twice(&ran.effects);
    out.fig("slots-ran-with-no-row", ran_without_row.len());
    out.fig("slots-run-before-and-after", again.len());
    out.fig("slots-completed-twice", twice.len());
    let twice = twice.iter().map(|(j, s)| (j.as_str(), s.as_str()));
    note_slots(out, "ran with no row", ran_without_row.iter().copied());
    note_slots(
        out,
        "ran before the crash and after the promotion",
        again.iter().copied(),
    );
    note_slots(out, "completed twice", twice);
}

/// The newest instant before `t` that the old primary wrote into `runs` and the promoted server
/// holds: a claim, a heartbeat or an outcome.
fn newest_write(runs: &[RunRecord], t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let attempts = runs
        .iter()
        .flat_map(|r| &r.attempts)
        .flat_map(|a| [Some(a.started_at), a.finished_at]);
    let beats = runs.iter().map(|r| r.heartbeat_at);
    attempts.chain(beats).flatten().filter(|w| *w < t).max()
}

/// One note listing `slots` (`job@HH:MM:SS`) under `what`, when there are any.
fn note_slots<'a>(out: &mut Outcome, what: &str, slots: impl Iterator<Item = (&'a str, &'a str)>) {
    let list: Vec<String> = slots
        .map(|(job, slot)| format!("{job}@{}", slot_at(slot).map_or(slot.into(), hms)))
        .collect();
    if !list.is_empty() {
        out.notes.push(format!("{what}: {}", list.join(" ")));
    }
}

/// The `(job, slot)` pairs whose body ran to its end (`end`) more than once.
fn completed_twice(effects: &[Effect]) -> Vec<(String, String)> {
    let mut ends: BTreeMap<(String, String), usize> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "end") {
        *ends.entry((e.job.clone(), e.slot.clone())).or_default() += 1;
    }
    ends.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}

/// A slot as the ledger writes it, read back.
fn slot_at(slot: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(slot).ok().map(|t| t.to_utc())
}

/// The ledger lines and rows of the slots outside `[a, b]`.
fn outside(
    effects: &[Effect],
    runs: &[RunRecord],
    a: DateTime<Utc>,
    b: DateTime<Utc>,
) -> (Vec<Effect>, Vec<RunRecord>) {
    let out = |t: DateTime<Utc>| t < a || t > b;
    let effects = (effects.iter())
        .filter(|e| slot_at(&e.slot).is_some_and(out))
        .cloned()
        .collect();
    let runs = (runs.iter())
        .filter(|r| out(r.key.scheduled_at))
        .cloned()
        .collect();
    (effects, runs)
}

/// `HH:MM:SS` and the milliseconds when there are any.
fn hms(t: DateTime<Utc>) -> String {
    if t.timestamp_subsec_millis() == 0 {
        t.format("%H:%M:%S").to_string()
    } else {
        t.format("%H:%M:%S%.3f").to_string()
    }
}
