//! `onceabandoned`: run-once as a Kubernetes CronJob runs it, one Job (one pod at a time) per slot,
//! for two jobs (two CronJobs, faulted independently, for twice the cycles in the time), each always
//! busy: bodies of 1.5 s every second, overlap `skip`, so a newer slot's pod
//! is running whenever an older one is retried. The harness plays the CronJob and Job controllers: a
//! pod for each slot at its instant; a pod that exits 1 or 4 (or is killed) is started again after
//! a backoff of 4 s (past the stale threshold, 2 s), up to a `backoffLimit` of 6; exit 0 completes
//! the Job, 2 and 3 fail it. Cycle after cycle, a pod is killed with SIGKILL mid-body.
//!
//! The invariant (issue 21, finding 9): a run-once pod exits 0 only when its slot succeeded (or was
//! recorded skipped by the overlap policy when the pod's first claim met a running body), or is
//! running under a live owner; when every Job has ended, no slot is left `abandoned`, `pending` or
//! `running` with nobody to run it, and every slot whose pod was killed ended `succeeded`.

use crate::prelude::*;

/// The body, in ms: longer than the interval, so the job is always busy.
const BODY_MS: u64 = 1_500;
/// The Job controller's wait before it starts a failed pod's replacement.
const BACKOFF: Duration = Duration::from_secs(4);
/// Pods a Job may fail before the Job fails (Kubernetes' default).
const BACKOFF_LIMIT: usize = 6;
/// From one kill to the next look for a pod to kill, in ms: a killed slot's replacement comes
/// [`BACKOFF`] later, while newer slots' pods keep the job busy.
const KILL_EVERY_MS: (u64, u64) = (4_000, 6_000);

/// The CronJobs: one job each.
const CRONJOBS: usize = 2;

/// One slot's Job.
struct Job {
    /// The job it runs (one CronJob's).
    name: String,
    slot: DateTime<Utc>,
    /// Each pod's process id, in order.
    pids: Vec<u32>,
    /// The pod running now.
    pod: Option<Node>,
    /// When its replacement is due (after a failed or killed pod).
    restart_at: Option<Instant>,
    /// Per pod started: its exit code, `None` if it was killed.
    exits: Vec<Option<u8>>,
    /// The `once ...` line of each pod that printed one.
    lines: Vec<String>,
    /// Whether one of its pods was killed.
    killed: bool,
    /// Complete (a pod exited 0) or failed (exit 2 or 3, or past the backoff limit).
    ended: bool,
}

impl Job {
    fn instance(&self) -> String {
        let cron = self.name.trim_start_matches("job");
        format!(
            "c{cron}p{}a{}",
            self.slot.format("%H%M%S"),
            self.exits.len()
        )
    }
}

pub(crate) fn onceabandoned(sc: &mut Sc) -> Outcome {
    let cycles = if sc.h.quick { 10 } else { 30 };
    let mut out = Outcome::new(&format!(
        "two CronJobs, one run-once pod at a time per slot (a Job: backoff 4 s, backoffLimit 6), 1.5 s bodies every second under overlap skip, {cycles} pods killed with SIGKILL mid-body: a pod exits 0 only when its slot succeeded, was skipped, or runs under a live owner; at the end no slot is abandoned, pending or running, and every killed slot succeeded; (a)-(e)"
    ));
    let names = job_names(CRONJOBS);
    let mut jobs: Vec<Job> = Vec::new();
    let first = next_second(Utc::now() + chrono_ms(500));
    let mut next_slot = first;
    // Per CronJob, when to look for a pod to kill; the second starts half a cycle later.
    let mut next_kill: Vec<Instant> = (0..CRONJOBS)
        .map(|c| Instant::now() + secs(3) + Duration::from_millis(KILL_EVERY_MS.0 * c as u64 / 2))
        .collect();
    let mut kills = 0;
    // Bounded, should no pod ever be found mid-body.
    let until = Instant::now() + secs(10 + 4 * cycles as u64);
    while kills < cycles && Instant::now() < until {
        if Utc::now() >= next_slot {
            for name in &names {
                jobs.push(start(sc, name, next_slot));
            }
            next_slot += chrono::Duration::seconds(1);
        }
        for (c, name) in names.iter().enumerate() {
            if Instant::now() >= next_kill[c] && kill_one(sc, &mut jobs, name) {
                kills += 1;
                next_kill[c] = Instant::now() + sc.rng.ms(KILL_EVERY_MS.0, KILL_EVERY_MS.1);
            }
        }
        tend(sc, &mut jobs);
        sleep(Duration::from_millis(20));
    }
    let last = next_slot - chrono::Duration::seconds(1);
    // No new slots: the Jobs still going run to their end.
    let deadline = Instant::now() + BACKOFF * BACKOFF_LIMIT as u32 + secs(60);
    while jobs.iter().any(|j| !j.ended) && Instant::now() < deadline {
        tend(sc, &mut jobs);
        sleep(Duration::from_millis(50));
    }
    let unended = jobs.iter().filter(|j| !j.ended).count();
    for job in &mut jobs {
        if let Some(pod) = job.pod.take() {
            pod.signal("KILL");
        }
    }
    let expected = expect(&names, &every(first, last, 1));
    let (report, runs, effects) = sc.check(&expected);
    judge(&mut out, &jobs, &runs, &effects);
    out.fig("slots", jobs.len());
    out.fig("pods", jobs.iter().map(|j| j.exits.len()).sum::<usize>());
    out.fig("pods-killed", kills);
    out.invariants(&report);
    out.require(kills == cycles, || {
        format!("only {kills} of {cycles} pods found mid-body to kill")
    });
    out.require(unended == 0, || {
        format!("{unended} Jobs had not ended a minute after their last backoff could")
    });
    out
}

/// The arguments of a pod for `name`'s `slot`.
fn pod_args(name: &str, slot: DateTime<Utc>) -> Vec<String> {
    let mut args = with_common(&[
        "--names",
        name,
        "--work-ms",
        &BODY_MS.to_string(),
        // A slot stays runnable for 10 minutes: a retried pod is never too late here.
        "--catch-up",
        "all:600:10",
        "--pool-size",
        "2",
    ]);
    args.push("--once".into());
    args.push(slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    args
}

/// The CronJob controller: a Job for `name`'s `slot`, its first pod started now.
fn start(sc: &Sc, name: &str, slot: DateTime<Utc>) -> Job {
    let mut job = Job {
        name: name.to_owned(),
        slot,
        pids: Vec::new(),
        pod: None,
        restart_at: None,
        exits: Vec::new(),
        lines: Vec::new(),
        killed: false,
        ended: false,
    };
    launch(sc, &mut job);
    job
}

fn launch(sc: &Sc, job: &mut Job) {
    let pod = sc.launch(
        &job.instance(),
        sc.h.cluster.port(),
        &pod_args(&job.name, job.slot),
    );
    job.pids.push(pod.pid());
    job.pod = Some(pod);
    job.restart_at = None;
}

/// The Job controller: reaps the pods that exited, completes or fails their Jobs, and starts the
/// replacements that are due.
fn tend(sc: &Sc, jobs: &mut [Job]) {
    for job in jobs.iter_mut().filter(|j| !j.ended) {
        if let Some(pod) = job.pod.as_mut() {
            pod.drain();
            let Some(line) = pod.seen.iter().find(|l| l.starts_with("once ")).cloned() else {
                continue;
            };
            let (_, _) = job.pod.take().expect("a pod").finish(secs(10));
            let code = line
                .strip_prefix("once code=")
                .and_then(|l| l.split(' ').next())
                .and_then(|c| c.parse::<u8>().ok())
                .unwrap_or(255);
            job.exits.push(Some(code));
            job.lines.push(line);
            match code {
                0 | 2 | 3 => job.ended = true,
                _ => failed(job),
            }
        } else if job.restart_at.is_some_and(|at| Instant::now() >= at) {
            launch(sc, job);
        }
    }
}

/// A pod of `job` failed (exit 1 or 4, or killed): its replacement after [`BACKOFF`], unless the
/// Job has used up its [`BACKOFF_LIMIT`].
fn failed(job: &mut Job) {
    if job.exits.len() > BACKOFF_LIMIT {
        job.ended = true;
    } else {
        job.restart_at = Some(Instant::now() + BACKOFF);
    }
}

/// Kills a pod that is running its body now (by the ledger: a `start` under its pid with nothing
/// after it), of a Job of `name` none of whose pods was killed yet; answers whether it found one.
/// The harness looks every 4-6 s, by the seed, so the kill lands anywhere in a body.
fn kill_one(sc: &mut Sc, jobs: &mut [Job], name: &str) -> bool {
    let effects = read_ledger(&sc.ledger);
    let running: BTreeSet<u32> = running_starts(&effects)
        .into_iter()
        .map(|e| e.pid)
        .collect();
    let candidates: Vec<usize> = (0..jobs.len())
        .filter(|i| jobs[*i].name == name && !jobs[*i].killed && !jobs[*i].ended)
        .filter(|i| {
            jobs[*i]
                .pod
                .as_ref()
                .is_some_and(|p| running.contains(&p.pid()))
        })
        .collect();
    if candidates.is_empty() {
        return false;
    }
    let job = &mut jobs[candidates[sc.rng.below(candidates.len())]];
    let Some(pod) = job.pod.take() else {
        return false;
    };
    sc.kill(pod.pid());
    let _ = pod.finish(secs(10));
    job.killed = true;
    job.exits.push(None);
    failed(job);
    true
}

/// The invariant over every Job's pods and its slot's row at the end.
fn judge(out: &mut Outcome, jobs: &[Job], runs: &[RunRecord], effects: &[Effect]) {
    let rows = index(runs);
    let mut verdicts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let mut said: BTreeMap<String, usize> = BTreeMap::new();
    for job in jobs {
        let key = (job.name.clone(), slot_name(job.slot));
        let status = rows.get(&key).map(|r| r.status);
        for code in &job.exits {
            let code = code.map_or("killed".to_owned(), |c| c.to_string());
            *codes.entry(code).or_insert(0) += 1;
        }
        if job.killed {
            for line in &job.lines {
                *said.entry(outcome_kind(line)).or_insert(0) += 1;
            }
        }
        if let Some((kind, failure)) = verdict(job, &key, status, effects) {
            *verdicts.entry(kind).or_insert(0) += 1;
            out.failures.push(failure);
        }
    }
    let restarted: usize = jobs.iter().map(|j| j.exits.len().saturating_sub(1)).sum();
    let killed = jobs.iter().filter(|j| j.killed).count();
    let killed_ok = jobs
        .iter()
        .filter(|j| j.killed)
        .filter(|j| {
            rows.get(&(j.name.clone(), slot_name(j.slot)))
                .is_some_and(|r| r.status == RunStatus::Succeeded)
        })
        .count();
    out.fig("pods-restarted", restarted);
    out.fig("killed-slots-pods-said", format!("{said:?}"));
    out.fig("exits", format!("{codes:?}"));
    out.fig("killed-slots-succeeded", format!("{killed_ok}/{killed}"));
    out.fig("violations-by-kind", format!("{verdicts:?}"));
}

/// What is wrong with `job`, whose slot `key` ended `status`: a kind and the failure line, or
/// `None`.
fn verdict(
    job: &Job,
    key: &(String, String),
    status: Option<RunStatus>,
    effects: &[Effect],
) -> Option<(&'static str, String)> {
    let shown = status.map_or("no row".to_owned(), |s| s.to_string());
    let done = matches!(status, Some(RunStatus::Succeeded | RunStatus::Skipped));
    let last = job.lines.last().map_or("", String::as_str);
    let pods = job.exits.len();
    let exited_0 = job.exits.last() == Some(&Some(0));
    let (kind, what) = if exited_0 && !done {
        let ran = ran_by(effects, job.pids.last().copied());
        (
            "exit-0-slot-left-undone",
            format!(
                "pod {pods} exited 0 (`{last}`; it ran {ran}) but the slot ended {shown}, with no pod left to run it"
            ),
        )
    } else if !done {
        (
            "slot-left-undone",
            format!(
                "ended {shown} after {pods} pods (exits {:?}, last said `{last}`)",
                job.exits
            ),
        )
    } else if exited_0
        && matches!(
            outcome_kind(last).as_str(),
            "suppressed-abandoned" | "suppressed-pending"
        )
    {
        (
            "exit-0-while-undone",
            format!(
                "pod {pods} exited 0 (`{last}`) while its slot was left with nobody to run it (a pod of another slot ran it later, as due work; it ended {shown})"
            ),
        )
    } else {
        return None;
    };
    Some((kind, format!("{} {}: {what}", key.0, key.1)))
}

/// A pod's `once` line as a kind: its outcome's first word, and for `suppressed` the status it
/// named (`suppressed-abandoned`, ...).
fn outcome_kind(line: &str) -> String {
    const STATUSES: [&str; 7] = [
        "abandoned",
        "pending",
        "running",
        "succeeded",
        "skipped",
        "failed",
        "dead",
    ];
    // `once code=N <outcome>`
    let text = line.splitn(3, ' ').nth(2).unwrap_or("");
    let mut words = text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty());
    match words.next().unwrap_or("") {
        "suppressed" => format!(
            "suppressed-{}",
            words.find(|w| STATUSES.contains(w)).unwrap_or("?")
        ),
        other => other.to_owned(),
    }
}

/// The bodies process `pid` started, by the ledger: `job slot attempt N`, or `no body`.
fn ran_by(effects: &[Effect], pid: Option<u32>) -> String {
    let ran: Vec<String> = effects
        .iter()
        .filter(|e| e.kind == "start" && Some(e.pid) == pid)
        .map(|e| format!("{} {} attempt {}", e.job, e.slot, e.attempt))
        .collect();
    if ran.is_empty() {
        "no body".to_owned()
    } else {
        ran.join(", ")
    }
}
