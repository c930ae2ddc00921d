//! What the scenario files share: `use crate::prelude::*;` brings the harness's types and helpers
//! and the imports nearly every scenario needs.

pub(crate) use std::collections::{BTreeMap, BTreeSet};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use chrono::{DateTime, Utc};
pub(crate) use slotguard::store::{RunRecord, RunStatus, Trigger};
pub(crate) use slotguard_process_tests::invariants::{Report, every, expect, slot_name};
pub(crate) use slotguard_process_tests::{Effect, Node, executions, read_ledger, signal};

pub(crate) use crate::harness::Outcome;
pub(crate) use crate::sc::Sc;
pub(crate) use crate::util::*;
