//! `dst`: replicas whose injected clocks cross the real 2026 DST transitions of three zones, with a
//! job per DST policy whose wall times fall in the skipped gap or in the repeated hour; in each zone
//! with a repeated hour, a replica is stopped in its first pass and restarted in its second. Two more
//! groups (New York's fall back, Santiago's lost midnight) stop all of their replicas before the
//! transition and start them again after it, with catch-up `all`: the slots of the outage must be
//! caught up, each once.
//!
//! The slots each policy should run are computed here from chrono-tz and docs/time.md, never by
//! slotguard's slot engine.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Timelike, Utc};
use chrono_tz::Tz;
use slotguard::store::RunStatus;
use slotguard_process_tests::Node;
use slotguard_process_tests::dst::{Change, POLICIES, Pattern, Policy, changes, wall};
use slotguard_process_tests::invariants::slot_name;

use crate::dst_check::{Want, group_figures, judge, listed_missed};
use crate::harness::Outcome;
use crate::sc::{Rng, Sc};
use crate::util::{
    chrono_ms, next_second, running_starts, secs, secs_f, sleep_until, stop_all, with_common,
};

/// The transitions: a name (the prefix of its jobs and replicas), the zone and the UTC date of the
/// transition instant.
const TRANSITIONS: &[(&str, &str, (i32, u32, u32))] = &[
    // 2026-03-08 02:00 EST -> 03:00 EDT.
    ("nys", "America/New_York", (2026, 3, 8)),
    // 2026-11-01 02:00 EDT -> 01:00 EST.
    ("nyf", "America/New_York", (2026, 11, 1)),
    // 2026-04-05 02:00 +11 -> 01:30 +1030 (15:00Z on the 4th).
    ("lhf", "Australia/Lord_Howe", (2026, 4, 4)),
    // 2026-10-04 02:00 +1030 -> 02:30 +11 (15:30Z on the 3rd).
    ("lhs", "Australia/Lord_Howe", (2026, 10, 3)),
    // 2026-04-04 24:00 -03 -> 23:00 -04 (03:00Z on the 5th).
    ("scf", "America/Santiago", (2026, 4, 5)),
    // 2026-09-06 00:00 -04 -> 01:00 -03 (04:00Z).
    ("scs", "America/Santiago", (2026, 9, 6)),
    // New York's fall back and Santiago's lost midnight again, for groups that go down as a whole.
    ("nyo", "America/New_York", (2026, 11, 1)),
    ("sco", "America/Santiago", (2026, 9, 6)),
];

/// One transition's replicas and jobs.
pub(crate) struct Group {
    pub(crate) name: &'static str,
    pub(crate) tz: Tz,
    pub(crate) change: Change,
    /// The patterns, each with the suffix of its jobs' names.
    pub(crate) patterns: Vec<(&'static str, Pattern)>,
    pub(crate) replicas: usize,
    /// Virtual minus real time: the group's clocks read `real + shift`.
    pub(crate) shift: chrono::Duration,
    /// Every replica goes down in the first pass and comes back in the second, with catch-up `all`.
    pub(crate) outage: bool,
}

impl Group {
    /// Every job: name, policy, fixed-time or not, pattern.
    pub(crate) fn jobs(&self) -> Vec<(String, Policy, bool, &Pattern)> {
        let mut out = Vec::new();
        for (suffix, pattern) in &self.patterns {
            for p in POLICIES {
                for fixed in [true, false] {
                    let kind = if fixed { "f" } else { "n" };
                    let name = format!("{}_{}_{kind}{suffix}", self.name, p.name());
                    out.push((name, p, fixed, pattern));
                }
            }
        }
        out
    }

    fn repeats(&self) -> bool {
        self.change.after < self.change.before
    }

    fn args(&self, start_at: DateTime<Utc>, anchor: DateTime<Utc>) -> Vec<String> {
        let jobs = self.jobs();
        let names: Vec<&str> = jobs.iter().map(|(n, ..)| n.as_str()).collect();
        let dsts: Vec<&str> = jobs.iter().map(|(_, p, ..)| p.name()).collect();
        let crons: Vec<String> = jobs
            .iter()
            .map(|(_, _, fixed, pattern)| pattern.cron(*fixed))
            .collect();
        let at = start_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let real = anchor.timestamp_millis().to_string();
        let catch_up = if self.outage { "all:600:1000" } else { "skip" };
        with_common(&[
            "--catch-up",
            catch_up,
            "--catch-up-rate",
            "50",
            "--names",
            &names.join(","),
            "--cron",
            &crons.join(";"),
            "--dst",
            &dsts.join(","),
            "--tz",
            self.tz.name(),
            "--work-ms",
            "300",
            "--pool-size",
            "2",
            "--start-at",
            &at,
            "--start-at-real-ms",
            &real,
        ])
    }
}

/// What happens to one replica, and when (real time).
#[derive(Debug, Clone)]
struct Event {
    at: DateTime<Utc>,
    group: usize,
    /// `None`: to stop, a replica running a body of this second (else any); to start, the replica
    /// of the group stopped first.
    replica: Option<usize>,
    /// `TERM` or `KILL` to stop it, `None` to start it again.
    stop: Option<&'static str>,
}

pub(crate) fn dst(sc: &mut Sc) -> Outcome {
    let quick = sc.h.quick;
    // Seconds: start-up allowance and window before the transition, window after it.
    let (allow, pre, post) = if quick { (4, 4, 10) } else { (6, 8, 30) };
    let mut out = Outcome::new(
        "each job runs exactly the slots docs/time.md gives its DST policy (computed from chrono-tz), each once, with the documented wall time; none in gaps or second passes the policy leaves out; a replica stopped in the first pass of a repeated hour and restarted in the second runs nothing twice and loses nothing; (a)-(e)",
    );
    let mut groups = Vec::new();
    for &(name, zone, date) in TRANSITIONS {
        match Group::new(name, zone, date, quick) {
            Ok(g) => groups.push(g),
            Err(e) => out.failures.push(e),
        }
    }
    if !out.failures.is_empty() {
        return out;
    }
    // Every group's clocks reach its transition at the same real instant, `allow + pre` seconds after
    // the first launch, and their whole seconds are the real clock's.
    let anchor = next_second(Utc::now());
    sleep_until(anchor);
    let real_t = anchor + chrono::Duration::seconds(allow + pre);
    for g in &mut groups {
        g.shift = g.change.at - real_t;
    }
    let mut play = Play::launch(sc, &groups, anchor, real_t);
    let ready = Utc::now();
    out.fig("all-ready-before-transition", secs_f(real_t - ready));
    out.require(real_t - ready >= chrono_ms(2_000), || {
        format!(
            "the replicas were ready only {} before the transition",
            secs_f(real_t - ready)
        )
    });
    let from_real = ready + chrono_ms(1_000);
    for e in &plan(sc, &groups, real_t, quick) {
        play.event(sc, &mut out, &groups, e);
    }
    play.finish_stops();
    sleep_until(real_t + chrono::Duration::seconds(post));
    let end_real = Utc::now();
    let to_real = end_real - chrono_ms(1_000);
    play.unclean += stop_all(play.nodes.drain(..).flatten().flatten().collect());
    let want = Want::of(&groups, (from_real, to_real), (anchor, end_real));
    let (report, runs, effects) = sc.check(&want.must);
    let tally = judge(&mut out, &want, &runs, &effects, &play.killed_pids);
    let listed = listed_missed(sc, &mut out, &groups, (from_real, to_real));
    let caught_up = runs
        .iter()
        .filter(|r| r.trigger == slotguard::store::Trigger::CatchUp)
        .filter(|r| r.status == RunStatus::Succeeded)
        .count();
    group_figures(&mut out, &groups, &want.per_group);
    out.fig("replicas", groups.iter().map(|g| g.replicas).sum::<usize>());
    out.fig("restarts", play.restarts.join(","));
    tally.figures(&mut out, caught_up, listed);
    out.invariants(&report);
    out.require(caught_up > 0, || {
        "the group that went down in the first pass caught nothing up".into()
    });
    let spurious = tally.spurious;
    out.require(spurious == 0, || {
        format!("{spurious} rows for slots the policies do not give")
    });
    out.require_clean(play.unclean, "replicas");
    out
}

impl Group {
    /// The group of the transition of `zone` on the UTC date `(y, m, d)`: its patterns put wall
    /// times on either side of it; an error when that date has not exactly one offset change.
    fn new(
        name: &'static str,
        zone: &str,
        (y, m, d): (i32, u32, u32),
        quick: bool,
    ) -> Result<Group, String> {
        let step = if quick { 2 } else { 1 };
        let tz: Tz = zone.parse().expect("a zone chrono-tz knows");
        let day = NaiveDate::from_ymd_opt(y, m, d)
            .expect("a date")
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc();
        let found = changes(tz, day, day + chrono::Duration::days(1));
        let [change] = found[..] else {
            return Err(format!(
                "{zone}: {} offset changes on {y}-{m:02}-{d:02} UTC (want 1)",
                found.len()
            ));
        };
        // The wall times on either side of the transition: the last before it, and the first of
        // the gap (when the clock springs forward) or of the second pass (when it falls back).
        let last = wall(tz, change.at - chrono::Duration::seconds(1));
        let next = if change.after > change.before {
            last + chrono::Duration::seconds(1)
        } else {
            wall(tz, change.at)
        };
        let mut minutes = vec![last.minute(), next.minute()];
        let mut hours = vec![last.hour(), next.hour()];
        minutes.dedup();
        hours.dedup();
        let mut patterns = vec![(
            "",
            Pattern {
                step,
                minutes: minutes.clone(),
                hours: hours.clone(),
            },
        )];
        if change.after > change.before {
            // Also the wall times right after the gap: gap times moved onto them (shift, and vixie's
            // fixed-time jobs at T) fire once there, named by the gap's wall time.
            let after = wall(tz, change.at);
            for (list, v) in [(&mut minutes, after.minute()), (&mut hours, after.hour())] {
                if !list.contains(&v) {
                    list.push(v);
                }
            }
            let wide = Pattern {
                step,
                minutes,
                hours,
            };
            patterns.push(("w", wide));
        }
        let outage = name.ends_with('o');
        let replicas = if change.after < change.before && !outage {
            3
        } else {
            2
        };
        Ok(Group {
            name,
            tz,
            change,
            patterns,
            replicas: if quick || outage { replicas } else { 3 },
            shift: chrono::Duration::zero(),
            outage,
        })
    }

    /// The pattern's step in seconds (1, or 2 in the quick set).
    fn step(&self) -> u32 {
        self.patterns[0].1.step
    }
}

/// When a stop lands: a kill lands 5-250 ms into a second that has slots: between a replica's lock
/// and its claim (the others' second look at the slot runs it), or in the job bodies (300 ms of
/// work), whose runs are taken over, named as they were claimed. The groups' whole seconds are the
/// real clock's, and each shift is a whole number of seconds.
fn mid_run(rng: &mut Rng, at: DateTime<Utc>, kind: &str, g: &Group) -> DateTime<Utc> {
    if kind != "KILL" {
        return at;
    }
    let v = (at + g.shift).timestamp();
    let v = v - v.rem_euclid(i64::from(g.step()));
    DateTime::from_timestamp(v, 0).expect("in range") - g.shift
        + chrono::Duration::from_std(rng.ms(5, 250)).expect("small")
}

/// A seeded instant `lo..=hi` ms from `t` (negative: before it).
fn around(rng: &mut Rng, t: DateTime<Utc>, lo: u64, hi: u64, before: bool) -> DateTime<Utc> {
    let d = chrono::Duration::from_std(rng.ms(lo, hi)).expect("small");
    if before { t - d } else { t + d }
}

/// The stops and starts, in time order. In each zone with a repeated hour: stop one replica in the
/// first pass, start it again in the second (and, in the full set, once more inside the second
/// pass). The outage groups stop every replica before T and start them again after it.
fn plan(sc: &mut Sc, groups: &[Group], real_t: DateTime<Utc>, quick: bool) -> Vec<Event> {
    let mut events = Vec::new();
    let event = |at, group, replica, stop| Event {
        at,
        group,
        replica,
        stop,
    };
    for (gi, g) in groups.iter().enumerate() {
        if !g.repeats() && !g.outage {
            continue;
        }
        let before = around(&mut sc.rng, real_t, 1_000, 3_000, true);
        let after = around(&mut sc.rng, real_t, 500, 2_500, false);
        if g.outage {
            for replica in 0..g.replicas {
                events.push(event(before, gi, Some(replica), Some("TERM")));
                events.push(event(after, gi, Some(replica), None));
            }
            continue;
        }
        let kind = match g.name {
            "nyf" => "TERM",
            "lhf" => "KILL",
            _ if sc.rng.below(2) == 0 => "TERM",
            _ => "KILL",
        };
        events.push(event(
            mid_run(&mut sc.rng, before, kind, g),
            gi,
            None,
            Some(kind),
        ));
        events.push(event(after, gi, None, None));
        if !quick {
            // A replica stopped and started again inside the second pass.
            let kind = if sc.rng.below(2) == 0 { "TERM" } else { "KILL" };
            let stop = around(&mut sc.rng, real_t, 8_000, 12_000, false);
            let start = around(&mut sc.rng, stop, 1_000, 3_000, false);
            events.push(event(
                mid_run(&mut sc.rng, stop, kind, g),
                gi,
                None,
                Some(kind),
            ));
            events.push(event(start, gi, None, None));
        }
    }
    events.sort_by_key(|e| e.at);
    events
}

/// The replicas while the events play.
struct Play {
    args: Vec<Vec<String>>,
    /// Per group, its replicas (`None` while stopped).
    nodes: Vec<Vec<Option<Node>>>,
    /// The killed replicas: a run they were in may be executed again.
    killed_pids: BTreeSet<u32>,
    /// `instance:KIND@wall->start@wall`, per stop.
    restarts: Vec<String>,
    /// Signalled, not yet waited for: a stop is sent on time, its exit awaited before the restart.
    stopping: BTreeMap<(usize, usize), (Node, &'static str)>,
    /// Per group, the replicas stopped and not started again, in order.
    down: Vec<Vec<usize>>,
    /// Replicas that did not exit cleanly when stopped with SIGTERM.
    unclean: usize,
    /// The real instant every group's clock reaches its transition.
    real_t: DateTime<Utc>,
}

impl Play {
    /// Every group's replicas, started together at `anchor` on their shifted clocks, and ready.
    fn launch(sc: &Sc, groups: &[Group], anchor: DateTime<Utc>, real_t: DateTime<Utc>) -> Play {
        let args: Vec<Vec<String>> = groups
            .iter()
            .map(|g| g.args(anchor + g.shift, anchor))
            .collect();
        let port = sc.h.cluster.port();
        let mut nodes: Vec<Vec<Option<Node>>> = groups
            .iter()
            .zip(&args)
            .map(|(g, a)| {
                (0..g.replicas)
                    .map(|i| Some(sc.launch(&format!("{}{i}", g.name), port, a)))
                    .collect()
            })
            .collect();
        for node in nodes.iter_mut().flatten().flatten() {
            node.wait_for("ready", secs(60));
        }
        set_registration_back(sc);
        Play {
            args,
            nodes,
            killed_pids: BTreeSet::new(),
            restarts: Vec::new(),
            stopping: BTreeMap::new(),
            down: vec![Vec::new(); groups.len()],
            unclean: 0,
            real_t,
        }
    }

    /// Waits for `node`'s exit; answers 1 when a SIGTERM'd one did not exit cleanly.
    fn finish(node: Node, kind: &str) -> usize {
        let (_, ok) = node.finish(secs(30));
        usize::from(kind == "TERM" && !ok)
    }

    /// Waits for the exits of the replicas still stopping.
    fn finish_stops(&mut self) {
        for (node, kind) in std::mem::take(&mut self.stopping).into_values() {
            self.unclean += Play::finish(node, kind);
        }
    }

    /// Carries out `e` at its instant.
    fn event(&mut self, sc: &mut Sc, out: &mut Outcome, groups: &[Group], e: &Event) {
        sleep_until(e.at);
        let g = &groups[e.group];
        let now = Utc::now() + g.shift;
        match e.stop {
            Some(kind) => self.stop(sc, out, g, e, kind, now),
            None => self.start(sc, out, g, e, now),
        }
    }

    /// Stops `e`'s replica (or one running a body of this second, or any) with `kind`.
    fn stop(
        &mut self,
        sc: &mut Sc,
        out: &mut Outcome,
        g: &Group,
        e: &Event,
        kind: &'static str,
        now: DateTime<Utc>,
    ) {
        let nodes = &self.nodes[e.group];
        let live: Vec<usize> = (0..g.replicas).filter(|i| nodes[*i].is_some()).collect();
        let Some(replica) = e.replica.or_else(|| {
            running_now(sc, g, nodes, now).or_else(|| live.get(sc.rng.below(live.len())).copied())
        }) else {
            return;
        };
        let Some(node) = self.nodes[e.group][replica].take() else {
            return;
        };
        let instance = format!("{}{replica}", g.name);
        if e.at < self.real_t {
            out.require(now < g.change.at, || {
                format!("{instance} stopped at {now}, after the first pass")
            });
        }
        if kind == "KILL" {
            self.killed_pids.insert(node.pid());
            sc.kill(node.pid());
        } else {
            node.signal(kind);
        }
        self.restarts.push(format!(
            "{instance}:{kind}@{}",
            wall(g.tz, now).format("%H:%M:%S%.3f")
        ));
        self.stopping.insert((e.group, replica), (node, kind));
        self.down[e.group].push(replica);
    }

    /// Starts `e`'s replica (or the group's first stopped one) again, once its stop has exited; it
    /// must come back in the second pass (or past the gap).
    fn start(&mut self, sc: &Sc, out: &mut Outcome, g: &Group, e: &Event, now: DateTime<Utc>) {
        let c = g.change;
        // After T: in the second pass of a repeated hour, or past a gap.
        let second_pass = now >= c.at
            && (!g.repeats() || now < c.at + chrono::Duration::seconds(c.before - c.after));
        let down = &mut self.down[e.group];
        let replica = match e.replica {
            Some(r) => {
                down.retain(|d| *d != r);
                r
            }
            None if !down.is_empty() => down.remove(0),
            None => return,
        };
        let instance = format!("{}{replica}", g.name);
        if let Some((node, kind)) = self.stopping.remove(&(e.group, replica)) {
            self.unclean += Play::finish(node, kind);
        }
        let mut node = sc.launch(&instance, sc.h.cluster.port(), &self.args[e.group]);
        node.wait_for("ready", secs(60));
        let ready = Utc::now() + g.shift;
        if let Some(stopped) = self
            .restarts
            .iter_mut()
            .rev()
            .find(|r| r.starts_with(&format!("{instance}:")))
        {
            stopped.push_str(&format!(
                "->start@{}",
                wall(g.tz, ready).format("%H:%M:%S%.3f")
            ));
        }
        out.require(second_pass, || {
            format!("{instance} restarted at {now}: before T, or past the second pass")
        });
        self.nodes[e.group][replica] = Some(node);
    }
}

/// A replica of `g` with a job body of the current second (virtual `now`) still running, by the
/// effects ledger.
fn running_now(sc: &Sc, g: &Group, nodes: &[Option<Node>], now: DateTime<Utc>) -> Option<usize> {
    let second = DateTime::from_timestamp(now.timestamp(), 0)?;
    let slot = slot_name(second);
    let prefix = format!("{}_", g.name);
    let effects = slotguard_process_tests::read_ledger(&sc.ledger);
    let running: BTreeSet<u32> = running_starts(&effects)
        .into_iter()
        .filter(|e| e.slot == slot && e.job.starts_with(&prefix))
        .map(|e| e.pid)
        .collect();
    nodes
        .iter()
        .position(|n| n.as_ref().is_some_and(|n| running.contains(&n.pid())))
}

/// The replicas' clocks are shifted to their transitions, months away from the store's clock, by
/// which the store records when each job was first registered; catch-up and `missed` count from
/// then. Set back, it reads the shifted slots as slots of jobs that existed.
fn set_registration_back(sc: &Sc) {
    let pool = sc.pool();
    let sql = format!(
        "UPDATE \"{}\".jobs SET registered_at = '2000-01-01T00:00:00Z'",
        sc.schema
    );
    sc.h.rt
        .block_on(sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool))
        .expect("set the jobs' registration back");
    sc.h.rt.block_on(pool.close());
}
