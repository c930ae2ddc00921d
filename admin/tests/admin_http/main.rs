//! The admin API over HTTP: every route, its errors, and hostile input, through the axum router,
//! one module per route group.
#![cfg(feature = "http")]

#[path = "../support/registered.rs"]
mod registered;
mod support;

mod backfill;
mod calendars;
mod changes;
mod jobs;
mod missed;
mod no_panic;
mod refusals;
mod replicas;
mod runs;
mod schedules;
