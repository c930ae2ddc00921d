//! The claim rules, written once.
//!
//! Every store decides the same questions when a slot is claimed: is it due, does its row exist, is
//! another run of its job and partition running, what does the overlap policy make of that, which
//! stale runs are fenced, which runs have had all their attempts. This module answers them as pure
//! functions of the request, the rows that matter and the store's clock, and returns a *plan*: what
//! to write, row by row, and the [`Event`]s it implies. The memory and SQLite backends carry the
//! plan out inside their transaction; PostgreSQL carries the same rules out in one statement per
//! call for speed, and a model-based test (`tests/tests/rulebook.rs`) holds all three to this
//! module.
//!
//! The vocabulary (the reasons recorded on rows and attempts) lives in [`reason`], so that a
//! reason is spelled once.

mod claim;
mod due;
mod event;
mod facts;
pub mod reason;

pub use claim::{ClaimPlan, Mode, NewRow, SlotPlan, plan_claim};
pub use due::{DuePlan, jobs_with_due_work, plan_due};
pub use event::Event;
pub use facts::{Change, RowFacts};
