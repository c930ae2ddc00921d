//! What the `otel` layer adds to a run: one run of a job (`Scheduler::run_once` on the memory
//! store, the scheduler built for it), with no subscriber, and with a `tracing-opentelemetry`
//! layer exporting every span (`job_run`, `job_claim`, `job_body`) to the SDK's in-memory
//! exporter. The difference is the cost of the run's trace; docs/PERFORMANCE.md has the figures.
//!
//! `cargo bench -p slotguard-benches --bench traces`

use criterion::{Criterion, criterion_group, criterion_main};
use slotguard::{Job, JobContext, MemoryBackend, Scheduler, SlotSource};

/// One run of a job whose body does nothing.
async fn one_run() {
    let job = Job::new("traced", "* * * * * *", |_ctx: JobContext| async {});
    let scheduler = Scheduler::builder()
        .backend(MemoryBackend::new())
        .job(job)
        .build()
        .expect("build");
    let ran = scheduler.run_once("traced", SlotSource::Latest).await;
    assert!(ran.is_ok(), "{ran:?}");
}

fn runs(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("run");
    group.bench_function("no subscriber", |b| b.iter(|| runtime.block_on(one_run())));

    let (exporter, _provider, subscriber) = slotguard_tests::traces::in_memory();
    tracing::subscriber::with_default(subscriber, || {
        group.bench_function("otel layer, in-memory exporter", |b| {
            b.iter(|| {
                runtime.block_on(one_run());
                exporter.reset();
            });
        });
    });
    let spans = exporter.get_finished_spans().expect("spans");
    assert!(spans.is_empty(), "reset after each run");
    group.finish();
}

criterion_group!(benches, runs);
criterion_main!(benches);
