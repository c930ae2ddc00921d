//! `tickrestart`: `pg_ctl restart -m immediate` timed to land on a slot's instant.

use crate::busy::{BUSY_JOBS, busy_args};
use crate::prelude::*;

/// One restart: when it began, when the server accepted connections again, and the whole second
/// it was aimed at.
struct Restart {
    down: DateTime<Utc>,
    back: DateTime<Utc>,
    slot: DateTime<Utc>,
}

impl Restart {
    fn landed(&self) -> bool {
        self.down <= self.slot && self.slot <= self.back
    }
}

pub(crate) fn tickrestart(sc: &mut Sc) -> Outcome {
    let nodes = sc.spawn_many(3, &busy_args(300));
    restart_rounds(sc, nodes, "").0
}

/// `nodes` run [`BUSY_JOBS`] jobs every second ([`busy_args`]); each round restarts the server
/// (immediate) just before a whole second. Checks (a)-(e) and that no slot lacks a row; answers
/// the outcome (its condition after `setup`), the rows and the `(job, slot)` pairs checked.
pub(crate) fn restart_rounds(
    sc: &mut Sc,
    nodes: Vec<Node>,
    setup: &str,
) -> (Outcome, Vec<RunRecord>, BTreeSet<(String, String)>) {
    let rounds = if sc.h.quick { 5 } else { 12 };
    let mut out = Outcome::new(&format!(
        "{setup}each round restarts the server (immediate) 50-250 ms before a whole second; at least one restart has that second's instant inside its downtime; every slot of the 5 jobs over the run has a row, none missing around a restart (d); (a)-(e)"
    ));
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(2));
    let mut restarts = Vec::new();
    for _ in 0..rounds {
        let slot = next_second(Utc::now() + chrono_ms(500));
        let before = chrono::Duration::from_std(sc.rng.ms(50, 250)).expect("small");
        sleep_until(slot - before);
        let down = Utc::now();
        sc.h.cluster.restart_immediate();
        let back = Utc::now();
        restarts.push(Restart { down, back, slot });
        sleep(sc.rng.ms(2_500, 3_500));
    }
    // A slot claimed late, or taken over, has its row by now.
    sleep(secs(2));
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let expected = expect(&job_names(BUSY_JOBS), &every(from, to, 1));
    let (report, runs, _) = sc.check(&expected);
    let rows = index(&runs);
    let near = |r: &Restart| {
        let slots = every(r.down - chrono_ms(1_000), r.back + chrono_ms(1_000), 1);
        expect(&job_names(BUSY_JOBS), &slots)
            .iter()
            .filter(|k| !rows.contains_key(*k))
            .count()
    };
    out.fig("restarts", restarts.len());
    out.fig(
        "downtime",
        restarts
            .iter()
            .map(|r| {
                format!(
                    "{}{}",
                    secs_f(r.back - r.down),
                    if r.landed() { "*" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("/"),
    );
    out.fig(
        "landed-on-a-slot(*)",
        restarts.iter().filter(|r| r.landed()).count(),
    );
    out.fig(
        "slots-without-a-row-around-restarts",
        restarts.iter().map(near).sum::<usize>(),
    );
    out.fig("slots", expected.len());
    out.invariants(&report);
    out.require(restarts.iter().any(Restart::landed), || {
        "no restart had its slot's instant inside its downtime".into()
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    (out, runs, expected)
}
