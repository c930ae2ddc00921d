//! Business calendars on the admin's path: rebuilding a job's rule from its stored definition
//! (`CalendarDefinition::rule`, once per job and page in `missed`, the timeline and next slots),
//! and reading a builtin calendar.
//!
//! Run: `cargo bench -p slotguard-benches --bench calendar -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use slotguard::{Adjust, BusinessRule, Calendar, CalendarDefinition};

fn calendar(c: &mut Criterion) {
    let rule = BusinessRule::new(Calendar::builtin("KR").expect("KR"), Adjust::Preceding);
    let stored = CalendarDefinition::of(&rule);
    c.bench_function("calendar/rule_from_stored_definition_KR", |b| {
        b.iter(|| black_box(&stored).rule().expect("a builtin rule"))
    });
    c.bench_function("calendar/builtin_shared_KR", |b| {
        b.iter(|| Calendar::builtin_shared(black_box("KR")).expect("KR"))
    });
    c.bench_function("calendar/builtin_owned_KR", |b| {
        b.iter(|| Calendar::builtin(black_box("KR")).expect("KR"))
    });
}

criterion_group!(benches, calendar);
criterion_main!(benches);
