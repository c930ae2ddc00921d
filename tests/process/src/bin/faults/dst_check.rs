//! `dst`'s expectations and judgement: what each job should have run, computed from chrono-tz and
//! docs/time.md (never by slotguard's slot engine), and what the rows and executions show against
//! it.

use chrono::{NaiveDateTime, TimeZone};
use chrono_tz::Tz;
use slotguard_process_tests::dst::{POLICIES, Policy, expected, wall};

use crate::dst::Group;
use crate::prelude::*;

/// Per job and pattern of a group: wide pattern?, policy, fixed-time?, slots in the window.
pub(crate) type Counts = Vec<(bool, Policy, bool, usize)>;

/// What each job should have run, computed from chrono-tz.
pub(crate) struct Want {
    /// The slots that must have run (inside the checked window).
    pub(crate) must: BTreeSet<(String, String)>,
    /// Every slot a policy gives over the run, with its wall time.
    may: BTreeMap<(String, String), NaiveDateTime>,
    /// Each slot's kind: `regular`, `gap` or `second-pass`.
    kinds: BTreeMap<(String, String), &'static str>,
    pub(crate) per_group: Vec<Counts>,
}

impl Want {
    /// Over the real windows `(from, to)` (checked) and `(launched, ended)` (the whole run).
    pub(crate) fn of(
        groups: &[Group],
        (from_real, to_real): (DateTime<Utc>, DateTime<Utc>),
        (anchor, end_real): (DateTime<Utc>, DateTime<Utc>),
    ) -> Want {
        let mut want = Want {
            must: BTreeSet::new(),
            may: BTreeMap::new(),
            kinds: BTreeMap::new(),
            per_group: Vec::new(),
        };
        for g in groups {
            let (from, to) = (from_real + g.shift, to_real + g.shift);
            let (launched, ended) = (anchor + g.shift, end_real + g.shift);
            let mut counts = Vec::new();
            for (job, policy, fixed, pattern) in g.jobs() {
                let mut inside = 0;
                for (at, w) in expected(g.tz, pattern, fixed, policy, launched, ended) {
                    let key = (job.clone(), slot_name(at));
                    want.kinds.insert(key.clone(), slot_kind(g.tz, at, w));
                    if at >= from && at <= to {
                        want.must.insert(key.clone());
                        inside += 1;
                    }
                    want.may.insert(key, w);
                }
                counts.push((job.ends_with('w'), policy, fixed, inside));
            }
            want.per_group.push(counts);
        }
        want
    }
}

/// A slot at `at` named by wall time `w`: in a gap (moved), in the second pass of a repeated hour,
/// or regular.
fn slot_kind(tz: Tz, at: DateTime<Utc>, w: NaiveDateTime) -> &'static str {
    if wall(tz, at) != w {
        "gap"
    } else if matches!(
        tz.from_local_datetime(&w),
        chrono::LocalResult::Ambiguous(_, later) if later.to_utc() == at
    ) {
        "second-pass"
    } else {
        "regular"
    }
}

/// What the rows showed against [`Want`].
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) spurious: usize,
    wrong_wall: usize,
    duplicates: usize,
    lost: usize,
    excused: usize,
    /// Succeeded slots by kind.
    ran: BTreeMap<&'static str, usize>,
}

impl Tally {
    pub(crate) fn figures(&self, out: &mut Outcome, caught_up: usize, listed: usize) {
        let ran = |k: &str| self.ran.get(k).copied().unwrap_or(0);
        out.fig(
            "ran",
            format!(
                "regular:{},gap:{},second-pass:{}",
                ran("regular"),
                ran("gap"),
                ran("second-pass")
            ),
        );
        out.fig("outage-slots-caught-up", caught_up);
        out.fig("listed-by-admin-missed", listed);
        out.fig("spurious", self.spurious);
        out.fig("wrong-wall", self.wrong_wall);
        out.fig("duplicates", self.duplicates);
        out.fig("lost", self.lost);
        out.fig("skipped-behind-a-running-run", self.excused);
    }
}

/// Every row against what the policies give: no slot they leave out, the documented wall time and
/// business date, executed once (a killed replica's execution aside), and every slot that must have
/// run succeeded (or skipped behind a run that was still running).
pub(crate) fn judge(
    out: &mut Outcome,
    want: &Want,
    runs: &[RunRecord],
    effects: &[Effect],
    killed_pids: &BTreeSet<u32>,
) -> Tally {
    let mut starts: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        starts
            .entry((e.job.clone(), e.slot.clone()))
            .or_default()
            .push(e.pid);
    }
    let mut t = Tally::default();
    let mut rows = BTreeSet::new();
    for run in runs {
        let key = (run.key.job.clone(), slot_name(run.key.scheduled_at));
        rows.insert(key.clone());
        let Some(w) = want.may.get(&key) else {
            t.spurious += 1;
            if t.spurious <= 10 {
                out.failures.push(format!(
                    "{key:?}: a row ({}, wall {}) for a slot the policy does not give",
                    run.status, run.wall_time
                ));
            }
            continue;
        };
        if run.wall_time != *w || run.business_date != w.date() {
            t.wrong_wall += 1;
            out.failures.push(format!(
                "{key:?}: wall {} business date {} (want {w}, {})",
                run.wall_time,
                run.business_date,
                w.date()
            ));
        }
        let pids = starts.get(&key).map_or(&[][..], Vec::as_slice);
        if pids.iter().filter(|p| !killed_pids.contains(*p)).count() > 1 {
            t.duplicates += 1;
            out.failures
                .push(format!("{key:?}: executed {} times", pids.len()));
        }
        if run.status == RunStatus::Succeeded {
            *t.ran
                .entry(want.kinds.get(&key).copied().unwrap_or("regular"))
                .or_insert(0) += 1;
        } else if want.must.contains(&key) {
            if skipped_behind(run, runs) {
                t.excused += 1;
            } else {
                t.lost += 1;
                out.failures.push(format!(
                    "{key:?}: ended {} ({:?})",
                    run.status, run.error_message
                ));
            }
        }
    }
    t.lost += want.must.iter().filter(|k| !rows.contains(*k)).count();
    for ((job, slot), pids) in &starts {
        if !want.may.contains_key(&(job.clone(), slot.clone())) {
            out.failures.push(format!(
                "({job}, {slot}): executed {}x, a slot the policy does not give",
                pids.len()
            ));
        }
    }
    t
}

/// Under overlap `skip`, a slot that falls due while another run of its job is running (a killed
/// replica's, until it is stale; a catch-up run) is recorded skipped. Only such a run justifies the
/// row.
fn skipped_behind(run: &RunRecord, runs: &[RunRecord]) -> bool {
    run.status == RunStatus::Skipped
        && run.error_message.as_deref() == Some("overlap: a previous run is still running")
        && runs.iter().any(|other| {
            other.key.job == run.key.job
                && other.id != run.id
                && other.attempts.iter().any(|a| {
                    a.started_at <= run.created_at
                        && a.finished_at.is_none_or(|f| f >= run.created_at)
                })
        })
}

/// The admin API judges the same windows by the stored schedules: nothing may be missing. Answers
/// how many slots it listed (each a failure).
pub(crate) fn listed_missed(
    sc: &Sc,
    out: &mut Outcome,
    groups: &[Group],
    (from_real, to_real): (DateTime<Utc>, DateTime<Utc>),
) -> usize {
    let backend = sc.backend(1);
    let admin = slotguard_admin::Admin::new(backend.clone());
    let mut listed = 0;
    for g in groups {
        for (job, ..) in g.jobs() {
            let window = (from_real + g.shift, to_real + g.shift);
            match sc.h.rt.block_on(admin.missed(&job, window.0, window.1)) {
                Ok(m) => {
                    listed += m.len();
                    for slot in m.iter().take(3) {
                        out.failures.push(format!(
                            "({job}, {}): listed by Admin::missed",
                            slot_name(slot.scheduled_at)
                        ));
                    }
                }
                Err(e) => out.failures.push(format!("Admin::missed({job}): {e}")),
            }
        }
    }
    sc.h.rt.block_on(backend.close());
    listed
}

/// One figure per group: its transition, and per policy the slots of its fixed-time and other jobs
/// in the window (and of the wide pattern, if any).
pub(crate) fn group_figures(out: &mut Outcome, groups: &[Group], per_group: &[Counts]) {
    for (g, counts) in groups.iter().zip(per_group) {
        let c = g.change;
        let shown = |wide: bool| {
            POLICIES
                .iter()
                .map(|p| {
                    let n = |fixed: bool| {
                        counts
                            .iter()
                            .find(|(w, q, f, _)| *w == wide && q == p && *f == fixed)
                            .map_or(0, |(.., n)| *n)
                    };
                    format!("{}:{}/{}", p.name(), n(true), n(false))
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        // The clock goes from `a` to `b` at T (read as `a` with the old offset).
        let a = wall(g.tz, c.at - chrono::Duration::seconds(1)) + chrono::Duration::seconds(1);
        let wide = if g.patterns.len() > 1 {
            format!("+wide{{{}}}", shown(true))
        } else {
            String::new()
        };
        out.fig(
            g.name,
            format!(
                "{}({}->{}){{{}}}{wide}",
                c.at.format("%Y-%m-%dT%H:%M:%SZ"),
                a.format("%H:%M"),
                wall(g.tz, c.at).format("%H:%M"),
                shown(false),
            ),
        );
    }
}
