//! The scenarios: one table, the only list of them. `--scenario all` runs them in this order;
//! `--scenario all --quick` runs those marked `quick`, at their small sizes (the CI subset,
//! `tests/faults_quick.rs`). A scenario's random choices come from the seed and its name, so it picks
//! the same faults alone as in `all`.

use crate::harness::Outcome;
use crate::sc::Sc;
use crate::{
    busy, catchup, catchup_kill, clock, dead_owner, dst, failover, kill9, lock_session,
    once_abandoned, overrun, pool, pooler, proxy, race, redis, restart, retries, rolling,
    sched_edits, sigstop, terminate, tick_restart, worker_overlap, workers,
};

/// One scenario: its name on the command line, whether the CI subset runs it, what it does (for
/// `--list`), and the function that runs it and says what it found.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) quick: bool,
    pub(crate) what: &'static str,
    pub(crate) run: fn(&mut Sc) -> Outcome,
}

/// Every scenario, in the order `all` runs them.
pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "race",
        quick: true,
        what: "replicas race on 1,000+ slots; each runs once",
        run: race::race,
    },
    Scenario {
        name: "kill9",
        quick: true,
        what: "kill -9 a random replica at a random point of claim/run/complete, restart it",
        run: kill9::kill9,
    },
    Scenario {
        name: "sigstop",
        quick: true,
        what: "SIGSTOP the owner past its stale threshold, SIGCONT after the take-over",
        run: sigstop::sigstop,
    },
    Scenario {
        name: "terminate",
        quick: true,
        what: "pg_terminate_backend on a random replica's backends",
        run: terminate::terminate,
    },
    Scenario {
        name: "restart",
        quick: true,
        what: "the database restarts mid-run",
        run: restart::restart,
    },
    Scenario {
        name: "overrun",
        quick: true,
        what: "work 2.5x the interval under skip, allow, buffer_one, replace",
        run: overrun::overrun,
    },
    Scenario {
        name: "retries",
        quick: true,
        what: "8 concurrent Admin::retry calls on one failed slot",
        run: retries::retries,
    },
    Scenario {
        name: "catchup",
        quick: true,
        what: "every replica down for a while; restart with catch-up all, latest, skip",
        run: catchup::catchup,
    },
    Scenario {
        name: "skew",
        quick: true,
        what: "one replica's clock +90 s, another's -90 s",
        run: clock::skew,
    },
    Scenario {
        name: "catchupkill",
        quick: true,
        what: "kill -9 replicas while the cluster drains catch-up runs",
        run: catchup_kill::catchupkill,
    },
    Scenario {
        name: "clockjump",
        quick: true,
        what: "one replica's clock steps an hour ahead, another's an hour back, mid-run",
        run: clock::clockjump,
    },
    Scenario {
        name: "proxy",
        quick: true,
        what: "latency, blackhole and resets between one replica and the database",
        run: proxy::proxy,
    },
    Scenario {
        name: "pooler",
        quick: true,
        what: "replicas only through a transaction-mode PgBouncer: it is restarted, its server sessions ended, a replica killed -9",
        run: pooler::pooler,
    },
    Scenario {
        name: "pool",
        quick: true,
        what: "a one-connection pool under many long runs: heartbeats must not starve",
        run: pool::pool,
    },
    Scenario {
        name: "dst",
        quick: true,
        what: "injected clocks across 2026 DST transitions, one job per policy; a restart in the repeated hour",
        run: dst::dst,
    },
    Scenario {
        name: "rolling",
        quick: true,
        what: "rolling restart from schedule v1 to v2 of the same job, one replica at a time",
        run: rolling::rolling,
    },
    Scenario {
        name: "busykill",
        quick: true,
        what: "kill -9 the replica running 5 every-second jobs (960 ms bodies, stale 3 s) while newer slots come",
        run: busy::busykill,
    },
    Scenario {
        name: "busystop",
        quick: true,
        what: "SIGSTOP the replica running the jobs for 5 s (past stale 3 s), then SIGCONT",
        run: busy::busystop,
    },
    Scenario {
        name: "locksession",
        quick: true,
        what: "pg_terminate_backend of only the busy replica's advisory-lock session",
        run: lock_session::locksession,
    },
    Scenario {
        name: "tickrestart",
        quick: true,
        what: "pg_ctl restart -m immediate landing on a slot's instant, several times",
        run: tick_restart::tickrestart,
    },
    Scenario {
        name: "spread",
        quick: true,
        what: "no faults: each of 3 replicas runs its share of 5 every-second jobs",
        run: busy::spread,
    },
    Scenario {
        name: "redisrows",
        quick: true,
        what: "Redis locks in front of the rows: kill -9 / SIGSTOP (past the lease) the busy replica, in turn",
        run: redis::redisrows,
    },
    Scenario {
        name: "redislock",
        quick: true,
        what: "Redis alone at level lock: kill -9 / SIGSTOP (past the lease) the busy replica, in turn",
        run: redis::redislock,
    },
    Scenario {
        name: "redisrestart",
        quick: true,
        what: "Redis alone at level lock: the Redis killed with -9 and started again empty, twice or more",
        run: redis::redisrestart,
    },
    Scenario {
        name: "workerkill",
        quick: true,
        what: "2 schedulers + 3 workers: kill -9 the worker running the job bodies, restart it",
        run: workers::workerkill,
    },
    Scenario {
        name: "workerstop",
        quick: true,
        what: "2 schedulers + 3 workers: SIGSTOP the busy worker for 5 s (past stale 3 s), then SIGCONT",
        run: workers::workerstop,
    },
    Scenario {
        name: "schedkill",
        quick: true,
        what: "2 schedulers + 2 workers: kill -9 one scheduler, restart it; the other keeps enqueuing",
        run: workers::schedkill,
    },
    Scenario {
        name: "workerscale",
        quick: true,
        what: "1 scheduler; workers scaled 1 -> 8 -> 2 (SIGTERM, graceful drain) during the run",
        run: workers::workerscale,
    },
    Scenario {
        name: "workerrestart",
        quick: true,
        what: "1 scheduler + 2 workers: pg_ctl restart -m immediate landing on a slot's instant",
        run: workers::workerrestart,
    },
    Scenario {
        name: "onceabandoned",
        quick: true,
        what: "run-once, one pod per slot (a CronJob), 1.5 s bodies every second: pods killed mid-body, restarted after a 4 s backoff",
        run: once_abandoned::onceabandoned,
    },
    Scenario {
        name: "workeroverlap",
        quick: true,
        what: "no faults: 960 ms bodies every second, overlap skip, in the worker shape beside the in-process shape",
        run: worker_overlap::workeroverlap,
    },
    Scenario {
        name: "schededits",
        quick: true,
        what: "4 replicas follow 3 stored schedules flipped, paused, removed and re-added, one slot skipped, while one replica is killed and another stopped past stale",
        run: sched_edits::schededits,
    },
    Scenario {
        name: "failoversync",
        quick: false,
        what: "kill -9 of the primary while bodies run; its synchronous standby promoted 250 ms later, the replicas' proxy moved to it",
        run: failover::failoversync,
    },
    Scenario {
        name: "failoverasync",
        quick: false,
        what: "the same failover to an asynchronous standby held 3 s behind: tokens granted once, completions of their own slot's body",
        run: failover::failoverasync,
    },
    Scenario {
        name: "deadowner",
        quick: false,
        what: "kill -9 the replica running 5 every-second jobs (960 ms bodies, stale 3 s), restart it: ticks skipped behind the dead owner, counted (issue 27 point 3)",
        run: dead_owner::deadowner,
    },
];
