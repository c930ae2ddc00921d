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

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use slotguard::store::RunStatus;
use slotguard_process_tests::Node;
use slotguard_process_tests::dst::{Change, POLICIES, Pattern, Policy, changes, expected, wall};
use slotguard_process_tests::invariants::slot_name;

use super::{Outcome, Sc, chrono_ms, secs, sleep_until, stop_all, with_common};

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
struct Group {
    name: &'static str,
    tz: Tz,
    change: Change,
    /// The patterns, each with the suffix of its jobs' names.
    patterns: Vec<(&'static str, Pattern)>,
    replicas: usize,
    /// Virtual minus real time: the group's clocks read `real + shift`.
    shift: chrono::Duration,
    /// Every replica goes down in the first pass and comes back in the second, with catch-up `all`.
    outage: bool,
}

impl Group {
    /// Every job: name, policy, fixed-time or not, pattern.
    fn jobs(&self) -> Vec<(String, Policy, bool, &Pattern)> {
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

pub(super) fn dst(sc: &mut Sc) -> Outcome {
    let quick = sc.h.quick;
    // Seconds: start-up allowance and window before the transition, window after it.
    let (allow, pre, post) = if quick { (4, 4, 10) } else { (6, 8, 30) };
    let step = if quick { 2 } else { 1 };
    let mut out = Outcome::new(
        "each job runs exactly the slots docs/time.md gives its DST policy (computed from chrono-tz), each once, with the documented wall time; none in gaps or second passes the policy leaves out; a replica stopped in the first pass of a repeated hour and restarted in the second runs nothing twice and loses nothing; (a)-(e)",
    );

    let mut groups = Vec::new();
    for &(name, zone, (y, m, d)) in TRANSITIONS {
        let tz: Tz = zone.parse().expect("a zone chrono-tz knows");
        let day = NaiveDate::from_ymd_opt(y, m, d)
            .expect("a date")
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc();
        let found = changes(tz, day, day + chrono::Duration::days(1));
        let [change] = found[..] else {
            out.failures.push(format!(
                "{zone}: {} offset changes on {y}-{m:02}-{d:02} UTC (want 1)",
                found.len()
            ));
            continue;
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
            patterns.push((
                "w",
                Pattern {
                    step,
                    minutes,
                    hours,
                },
            ));
        }
        let outage = name.ends_with('o');
        let replicas = if change.after < change.before && !outage {
            3
        } else {
            2
        };
        groups.push(Group {
            name,
            tz,
            change,
            patterns,
            replicas: if quick || outage { replicas } else { 3 },
            shift: chrono::Duration::zero(),
            outage,
        });
    }
    if !out.failures.is_empty() {
        return out;
    }

    // Every group's clocks reach its transition at the same real instant, `allow + pre` seconds after
    // the first launch, and their whole seconds are the real clock's.
    let anchor = super::next_second(Utc::now());
    sleep_until(anchor);
    let lead = chrono::Duration::seconds(allow + pre);
    let real_t = anchor + lead;
    for g in &mut groups {
        g.shift = g.change.at - real_t;
    }
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
    let ready = Utc::now();
    out.fig("all-ready-before-transition", super::secs_f(real_t - ready));
    out.require(real_t - ready >= chrono_ms(2_000), || {
        format!(
            "the replicas were ready only {} before the transition",
            super::secs_f(real_t - ready)
        )
    });
    let from_real = ready + chrono_ms(1_000);

    // In each zone with a repeated hour: stop one replica in the first pass, start it again in the
    // second (and, in the full set, once more inside the second pass). The outage groups stop every
    // replica before T and start them again after it.
    let mut events = Vec::new();
    // A kill lands 5-250 ms into a second that has slots: between a replica's lock and its claim
    // (the others' second look at the slot runs it), or in the job bodies (300 ms of work), whose
    // runs are taken over, named as they were claimed.
    // The groups' whole seconds are the real clock's, and each shift is a whole number of seconds.
    let mid_run = |rng: &mut super::Rng, at: DateTime<Utc>, kind: &str, g: &Group| {
        if kind != "KILL" {
            return at;
        }
        let v = (at + g.shift).timestamp();
        let v = v - v.rem_euclid(i64::from(step));
        DateTime::from_timestamp(v, 0).expect("in range") - g.shift
            + chrono::Duration::from_std(rng.ms(5, 250)).expect("small")
    };
    for (gi, g) in groups.iter().enumerate() {
        if !g.repeats() && !g.outage {
            continue;
        }
        let before = real_t - chrono::Duration::from_std(sc.rng.ms(1_000, 3_000)).expect("small");
        let after = real_t + chrono::Duration::from_std(sc.rng.ms(500, 2_500)).expect("small");
        if g.outage {
            for replica in 0..g.replicas {
                events.push(Event {
                    at: before,
                    group: gi,
                    replica: Some(replica),
                    stop: Some("TERM"),
                });
                events.push(Event {
                    at: after,
                    group: gi,
                    replica: Some(replica),
                    stop: None,
                });
            }
            continue;
        }
        let kind = match g.name {
            "nyf" => "TERM",
            "lhf" => "KILL",
            _ if sc.rng.below(2) == 0 => "TERM",
            _ => "KILL",
        };
        events.push(Event {
            at: mid_run(&mut sc.rng, before, kind, g),
            group: gi,
            replica: None,
            stop: Some(kind),
        });
        events.push(Event {
            at: after,
            group: gi,
            replica: None,
            stop: None,
        });
        if !quick {
            // A replica stopped and started again inside the second pass.
            let kind = if sc.rng.below(2) == 0 { "TERM" } else { "KILL" };
            let stop =
                real_t + chrono::Duration::from_std(sc.rng.ms(8_000, 12_000)).expect("small");
            let start = stop + chrono::Duration::from_std(sc.rng.ms(1_000, 3_000)).expect("small");
            events.push(Event {
                at: mid_run(&mut sc.rng, stop, kind, g),
                group: gi,
                replica: None,
                stop: Some(kind),
            });
            events.push(Event {
                at: start,
                group: gi,
                replica: None,
                stop: None,
            });
        }
    }
    events.sort_by_key(|e| e.at);
    let mut unclean = 0;
    // The killed replicas: a run they were in may be executed again.
    let mut killed_pids = BTreeSet::new();
    let mut restarts: Vec<String> = Vec::new();
    // Signalled, not yet waited for: a stop is sent on time, its exit awaited before the restart.
    let mut stopping: BTreeMap<(usize, usize), (Node, &str)> = BTreeMap::new();
    let finish = |node: Node, kind: &str| {
        let (_, ok) = node.finish(secs(30));
        usize::from(kind == "TERM" && !ok)
    };
    // Per group, the replicas stopped and not started again, in order.
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    for e in &events {
        sleep_until(e.at);
        let g = &groups[e.group];
        let now = Utc::now() + g.shift;
        let c = g.change;
        // After T: in the second pass of a repeated hour, or past a gap.
        let second_pass = now >= c.at
            && (!g.repeats() || now < c.at + chrono::Duration::seconds(c.before - c.after));
        match e.stop {
            Some(kind) => {
                let live: Vec<usize> = (0..g.replicas)
                    .filter(|i| nodes[e.group][*i].is_some())
                    .collect();
                let Some(replica) = e.replica.or_else(|| {
                    running_now(sc, g, &nodes[e.group], now)
                        .or_else(|| live.get(sc.rng.below(live.len())).copied())
                }) else {
                    continue;
                };
                let Some(node) = nodes[e.group][replica].take() else {
                    continue;
                };
                let instance = format!("{}{replica}", g.name);
                if e.at < real_t {
                    out.require(now < c.at, || {
                        format!("{instance} stopped at {now}, after the first pass")
                    });
                }
                if kind == "KILL" {
                    killed_pids.insert(node.pid());
                    sc.kill(node.pid());
                } else {
                    node.signal(kind);
                }
                restarts.push(format!(
                    "{instance}:{kind}@{}",
                    wall(g.tz, now).format("%H:%M:%S%.3f")
                ));
                stopping.insert((e.group, replica), (node, kind));
                down[e.group].push(replica);
            }
            None => {
                let replica = match e.replica {
                    Some(r) => {
                        down[e.group].retain(|d| *d != r);
                        r
                    }
                    None if !down[e.group].is_empty() => down[e.group].remove(0),
                    None => continue,
                };
                let instance = format!("{}{replica}", g.name);
                if let Some((node, kind)) = stopping.remove(&(e.group, replica)) {
                    unclean += finish(node, kind);
                }
                let mut node = sc.launch(&instance, port, &args[e.group]);
                node.wait_for("ready", secs(60));
                let ready = Utc::now() + g.shift;
                if let Some(stopped) = restarts
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
                nodes[e.group][replica] = Some(node);
            }
        }
    }
    for (node, kind) in stopping.into_values() {
        unclean += finish(node, kind);
    }
    sleep_until(real_t + chrono::Duration::seconds(post));
    let end_real = Utc::now();
    let to_real = end_real - chrono_ms(1_000);
    unclean += stop_all(nodes.into_iter().flatten().flatten().collect());

    // What each job should have run, computed from chrono-tz.
    let mut must: BTreeSet<(String, String)> = BTreeSet::new();
    let mut may: BTreeMap<(String, String), NaiveDateTime> = BTreeMap::new();
    let mut kinds: BTreeMap<(String, String), &'static str> = BTreeMap::new();
    let mut per_group = Vec::new();
    for g in &groups {
        let (from, to) = (from_real + g.shift, to_real + g.shift);
        let (launched, ended) = (anchor + g.shift, end_real + g.shift);
        let mut counts = Vec::new();
        for (job, policy, fixed, pattern) in g.jobs() {
            let all = expected(g.tz, pattern, fixed, policy, launched, ended);
            let mut inside = 0;
            for (at, w) in all {
                let key = (job.clone(), slot_name(at));
                let kind = if wall(g.tz, at) != w {
                    "gap"
                } else if matches!(
                    g.tz.from_local_datetime(&w),
                    chrono::LocalResult::Ambiguous(_, later) if later.to_utc() == at
                ) {
                    "second-pass"
                } else {
                    "regular"
                };
                kinds.insert(key.clone(), kind);
                if at >= from && at <= to {
                    must.insert(key.clone());
                    inside += 1;
                }
                may.insert(key, w);
            }
            counts.push((job.ends_with('w'), policy, fixed, inside));
        }
        per_group.push(counts);
    }

    let (report, runs, effects) = sc.check(&must);
    let mut starts: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        starts
            .entry((e.job.clone(), e.slot.clone()))
            .or_default()
            .push(e.pid);
    }
    let (mut spurious, mut wrong_wall, mut duplicates, mut lost, mut excused) = (0, 0, 0, 0, 0);
    let mut ran: BTreeMap<&str, usize> = BTreeMap::new();
    let mut rows = BTreeSet::new();
    for run in &runs {
        let key = (run.key.job.clone(), slot_name(run.key.scheduled_at));
        rows.insert(key.clone());
        let Some(w) = may.get(&key) else {
            spurious += 1;
            if spurious <= 10 {
                out.failures.push(format!(
                    "{key:?}: a row ({}, wall {}) for a slot the policy does not give",
                    run.status, run.wall_time
                ));
            }
            continue;
        };
        if run.wall_time != *w || run.business_date != w.date() {
            wrong_wall += 1;
            out.failures.push(format!(
                "{key:?}: wall {} business date {} (want {w}, {})",
                run.wall_time,
                run.business_date,
                w.date()
            ));
        }
        let pids = starts.get(&key).map_or(&[][..], Vec::as_slice);
        let survivors = pids.iter().filter(|p| !killed_pids.contains(*p)).count();
        if survivors > 1 {
            duplicates += 1;
            out.failures
                .push(format!("{key:?}: executed {} times", pids.len()));
        }
        if run.status == RunStatus::Succeeded {
            *ran.entry(kinds.get(&key).copied().unwrap_or("regular"))
                .or_insert(0) += 1;
        } else if must.contains(&key) {
            // Under overlap `skip`, a slot that falls due while another run of its job is running
            // (a killed replica's, until it is stale; a catch-up run) is recorded skipped. Only
            // such a run justifies the row.
            let behind = run.status == RunStatus::Skipped
                && run.error_message.as_deref() == Some("overlap: a previous run is still running")
                && runs.iter().any(|other| {
                    other.key.job == run.key.job
                        && other.id != run.id
                        && other.attempts.iter().any(|a| {
                            a.started_at <= run.created_at
                                && a.finished_at.is_none_or(|f| f >= run.created_at)
                        })
                });
            if behind {
                excused += 1;
            } else {
                lost += 1;
                out.failures.push(format!(
                    "{key:?}: ended {} ({:?})",
                    run.status, run.error_message
                ));
            }
        }
    }
    for key in &must {
        if !rows.contains(key) {
            lost += 1;
        }
    }
    for ((job, slot), pids) in &starts {
        if !may.contains_key(&(job.clone(), slot.clone())) {
            out.failures.push(format!(
                "({job}, {slot}): executed {}x, a slot the policy does not give",
                pids.len()
            ));
        }
    }

    // The admin API judges the same windows by the stored schedules: nothing may be missing.
    let backend = sc.backend(1);
    let admin = slotguard::admin::Admin::new(backend.clone());
    let mut listed = 0;
    for g in &groups {
        for (job, ..) in g.jobs() {
            match sc
                .h
                .rt
                .block_on(admin.missed(&job, from_real + g.shift, to_real + g.shift))
            {
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
    let caught_up = runs
        .iter()
        .filter(|r| r.trigger == slotguard::store::Trigger::CatchUp)
        .filter(|r| r.status == RunStatus::Succeeded)
        .count();
    for (g, counts) in groups.iter().zip(&per_group) {
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
        out.fig(
            g.name,
            format!(
                "{}({}->{}){{{}}}{}",
                c.at.format("%Y-%m-%dT%H:%M:%SZ"),
                a.format("%H:%M"),
                wall(g.tz, c.at).format("%H:%M"),
                shown(false),
                if g.patterns.len() > 1 {
                    format!("+wide{{{}}}", shown(true))
                } else {
                    String::new()
                }
            ),
        );
    }
    out.fig("replicas", groups.iter().map(|g| g.replicas).sum::<usize>());
    out.fig("restarts", restarts.join(","));
    out.fig(
        "ran",
        format!(
            "regular:{},gap:{},second-pass:{}",
            ran.get("regular").unwrap_or(&0),
            ran.get("gap").unwrap_or(&0),
            ran.get("second-pass").unwrap_or(&0)
        ),
    );
    out.fig("outage-slots-caught-up", caught_up);
    out.fig("listed-by-admin-missed", listed);
    out.fig("spurious", spurious);
    out.fig("wrong-wall", wrong_wall);
    out.fig("duplicates", duplicates);
    out.fig("lost", lost);
    out.fig("skipped-behind-a-running-run", excused);
    out.invariants(&report);
    out.require(caught_up > 0, || {
        "the group that went down in the first pass caught nothing up".into()
    });
    out.require(spurious == 0, || {
        format!("{spurious} rows for slots the policies do not give")
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

/// A replica of `g` with a job body of the current second (virtual `now`) still running, by the
/// effects ledger.
fn running_now(sc: &Sc, g: &Group, nodes: &[Option<Node>], now: DateTime<Utc>) -> Option<usize> {
    let second = DateTime::from_timestamp(now.timestamp(), 0)?;
    let slot = slot_name(second);
    let prefix = format!("{}_", g.name);
    let effects = slotguard_process_tests::read_ledger(&sc.ledger);
    let ended: BTreeSet<i64> = effects
        .iter()
        .filter(|e| e.kind != "start")
        .map(|e| e.token)
        .collect();
    let running: BTreeSet<u32> = effects
        .iter()
        .filter(|e| e.kind == "start" && e.slot == slot && e.job.starts_with(&prefix))
        .filter(|e| !ended.contains(&e.token))
        .map(|e| e.pid)
        .collect();
    nodes
        .iter()
        .position(|n| n.as_ref().is_some_and(|n| running.contains(&n.pid())))
}
