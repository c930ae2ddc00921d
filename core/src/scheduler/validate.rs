//! The checks `build()` runs on every job and setting, and the defaults jobs take.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

use slotguard_cron::{DstPolicy, Schedule, ScheduleError, Tz, check_job_name, parse_zone};

use crate::entry::{JobEntry, Layers};
use crate::guard::GuardLevel;
use crate::job::Job;
use crate::monitor::attached::Attached;
use crate::monitor::{Monitor, MonitorConfig};
use crate::operate::shown;
use crate::policy::{CatchUp, Overlap};

use super::ConfigError;

/// The default of [`SchedulerBuilder::retention`](super::SchedulerBuilder::retention): 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The longest retention accepted: a century, "forever" in practice.
const MAX_RETENTION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A retention from 1 s to [`MAX_RETENTION`], or what is wrong with it.
pub(super) fn check_retention(keep: Duration) -> Result<(), String> {
    if (Duration::from_secs(1)..=MAX_RETENTION).contains(&keep) {
        Ok(())
    } else {
        Err(format!(
            "{keep:?} is out of range: expected 1 s to 100 years"
        ))
    }
}

/// How long before a slot's instant a `scheduler`-role process enqueues it, unless
/// [`SchedulerBuilder::claim_ahead`](super::SchedulerBuilder::claim_ahead) says otherwise.
pub(super) const SCHEDULER_LEAD: Duration = Duration::from_millis(100);

/// The default of [`SchedulerBuilder::claim_ahead`](super::SchedulerBuilder::claim_ahead) for a
/// process that runs its slots, with a store and the system clock: a tenth of the shortest
/// interval a schedule can have, and longer than a claim's round trips on a loaded machine.
pub(super) const DEFAULT_LEAD: Duration = Duration::from_millis(100);

/// The default of [`SchedulerBuilder::load_spread`](super::SchedulerBuilder::load_spread) with a backend.
pub(super) const DEFAULT_SPREAD: Duration = Duration::from_millis(20);

/// What jobs take from the scheduler when they do not say.
pub(super) struct Defaults<'a> {
    pub(super) zone: Tz,
    pub(super) level: GuardLevel,
    pub(super) dst: DstPolicy,
    pub(super) has_backend: bool,
    /// A backend or a lock store: what the `lock` level needs.
    pub(super) has_locks: bool,
    pub(super) stale_after: Duration,
    pub(super) namespace: &'a str,
    pub(super) retention: Duration,
    /// The scheduler's monitor, for jobs without their own.
    pub(super) monitor: Option<Arc<dyn Monitor>>,
}

/// Whether a job asks for a setting.
type AsksFor = fn(&Job) -> bool;

/// The settings only the `slot` level can give, and whether a job asks for them.
const NEEDS_SLOT: &[(&str, AsksFor)] = &[
    ("an overlap policy other than `skip`", |j| {
        j.overlap.is_some_and(|o| o != Overlap::Skip)
    }),
    ("retries", |j| j.retry.is_some_and(|r| r.max_attempts > 1)),
    ("a catch-up policy", |j| {
        j.catch_up.is_some_and(|c| c != CatchUp::Skip)
    }),
    ("partitions", |j| j.partitions.is_some()),
    ("a deadline", |j| j.deadline.is_some()),
    ("a retention", |j| j.retention.is_some()),
    ("a process or cluster limit", |j| {
        j.limits.0.is_some() || j.limits.1.is_some()
    }),
];

/// A job's own settings out of range: its retention, its process and cluster limits.
fn job_settings(job: &Job, problems: &mut Vec<ConfigError>) {
    if let Some(Err(problem)) = job.retention.map(check_retention) {
        problems.push(ConfigError::Setting {
            setting: "retention",
            problem: format!("job `{}`: {problem}", job.name),
        });
    }
    for (setting, limit) in [
        ("process_limit", job.limits.0),
        ("cluster_limit", job.limits.1),
    ] {
        if limit == Some(0) {
            problems.push(ConfigError::Setting {
                setting,
                problem: format!(
                    "job `{}`: 0 would never run it; expected 1 or more",
                    job.name
                ),
            });
        }
    }
}

/// The problems of a job's guard level: a backend or lock store it needs, and every setting that
/// only the `slot` level can give.
fn level_problems(job: &Job, level: GuardLevel, defaults: &Defaults<'_>) -> Vec<ConfigError> {
    let missing = match level {
        GuardLevel::Slot => !defaults.has_backend,
        GuardLevel::Lock => !defaults.has_locks,
        _ => false,
    };
    if missing {
        return vec![ConfigError::NeedsBackend {
            job: job.name.clone(),
            level,
        }];
    }
    if level == GuardLevel::Slot {
        return Vec::new();
    }
    NEEDS_SLOT
        .iter()
        .filter(|(_, asks)| asks(job))
        .map(|(what, _)| ConfigError::NeedsSlotLevel {
            job: job.name.clone(),
            what,
        })
        .collect()
}

/// Validates one job: its name, zone, expression, level and the settings its level allows. Every
/// problem is listed, not only the first one found.
pub(super) fn validate(job: &Job, defaults: &Defaults<'_>) -> Result<JobEntry, Vec<ConfigError>> {
    let mut problems = Vec::new();
    if let Err(problem) = check_job_name(&job.name) {
        problems.push(ConfigError::InvalidName {
            job: shown(&job.name),
            reason: problem.reason(),
        });
    }
    let schedule_error = |source: ScheduleError| ConfigError::Schedule {
        job: job.name.clone(),
        source,
    };
    let zone = match job.tz.as_deref().map(parse_zone).transpose() {
        Ok(zone) => Some(zone.unwrap_or(defaults.zone)),
        Err(e) => {
            problems.push(schedule_error(e.into()));
            None
        }
    };
    let expr = job
        .cron
        .parse()
        .map_err(|e| problems.push(schedule_error(ScheduleError::Cron(e))))
        .ok();
    let rule = job
        .calendar
        .rule()
        .map_err(|source| {
            problems.push(ConfigError::Calendar {
                job: job.name.clone(),
                source,
            })
        })
        .ok();
    let level = job.guard.unwrap_or(defaults.level);
    problems.extend(level_problems(job, level, defaults));
    job_settings(job, &mut problems);
    let (Some(zone), Some(expr), Some(rule), true) = (zone, expr, rule, problems.is_empty()) else {
        return Err(problems);
    };
    let mut schedule = Schedule::new(expr, zone, job.dst.unwrap_or(defaults.dst));
    if let Some(rule) = rule {
        schedule = schedule.with_calendar(rule);
    }
    let overlap = job.overlap.unwrap_or_default();
    let monitor = attach(job, &schedule, defaults);
    Ok(JobEntry {
        name: Arc::from(job.name.as_str()),
        schedule,
        level,
        layers: Layers::for_job(level, overlap, job.partitions.is_some()),
        lock_key: job
            .lock_key
            .unwrap_or_else(|| derive_lock_key(defaults.namespace, &job.name)),
        running: AtomicBool::new(false),
        handler: Arc::clone(&job.handler),
        stale_after: defaults.stale_after,
        retry: job.retry.unwrap_or_default(),
        overlap,
        catch_up: job.catch_up.unwrap_or_default(),
        deadline: job.deadline,
        retention: job.retention.unwrap_or(defaults.retention),
        partitions: job.partitions.clone(),
        paused: AtomicBool::new(false),
        backlog: AtomicBool::new(false),
        look_again: AtomicBool::new(false),
        in_body: AtomicBool::new(false),
        limits: job.limits,
        bodies: AtomicUsize::new(0),
        monitor,
        of: None,
    })
}

/// The job's monitor (its own, else the scheduler's) with the settings derived from the job.
fn attach(job: &Job, schedule: &Schedule, defaults: &Defaults<'_>) -> Option<Attached> {
    let monitor = job.monitor.clone().or_else(|| defaults.monitor.clone())?;
    let config = MonitorConfig::for_job(
        schedule.expr().source(),
        schedule.zone().name(),
        job.deadline,
        job.retry.and_then(|r| r.timeout),
    );
    Some(Attached {
        monitor,
        config: Arc::new(config),
    })
}

/// The lock key of a job without an explicit one: FNV-1a 64 of `namespace/job`, stable across builds,
/// platforms and Rust versions.
pub fn derive_lock_key(namespace: &str, job: &str) -> i64 {
    crate::policy::fnv1a(namespace.bytes().chain([b'/']).chain(job.bytes())) as i64
}

pub(super) fn default_instance_id() -> String {
    use std::hash::{BuildHasher, RandomState};
    let host = crate::runtime::registry::host();
    let random = RandomState::new().hash_one(std::process::id()) & 0xffff;
    format!("{host}:{}:{random:04x}", std::process::id())
}
