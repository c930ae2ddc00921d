//! Search and filters of the jobs page: a name fragment, a state, a zone, a guard level. A `GET`
//! form, so a filtered page is a link, and the live refresh keeps the filters.

use std::collections::BTreeSet;

use maud::{Markup, html};
use serde::Deserialize;

use super::page::Base;
use crate::JobStatus;

/// The states a job can be filtered by.
const STATES: [(&str, &str); 3] = [
    ("active", "active (not paused)"),
    ("paused", "paused"),
    ("inactive", "no live replica"),
];

/// The guard levels, weakest first.
const GUARDS: [&str; 4] = ["none", "local", "lock", "slot"];

/// The jobs page's query: its filters, and the notice of a change just made.
#[derive(Deserialize, Default, Debug)]
pub(super) struct Search {
    pub(super) done: Option<String>,
    q: Option<String>,
    state: Option<String>,
    zone: Option<String>,
    guard: Option<String>,
}

/// A filter's value, unless it is empty ("any").
fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl Search {
    /// Whether any filter is set.
    pub(super) fn narrows(&self) -> bool {
        [&self.q, &self.state, &self.zone, &self.guard]
            .into_iter()
            .any(|v| set(v).is_some())
    }

    /// Whether `job` passes every filter set: the name holds the fragment (ignoring case), and the
    /// state, zone and guard are the ones asked for.
    pub(super) fn matches(&self, job: &JobStatus) -> bool {
        let def = &job.record.definition;
        let name_ok =
            set(&self.q).is_none_or(|q| def.name.to_lowercase().contains(&q.to_lowercase()));
        let state_ok = match set(&self.state) {
            None => true,
            Some("active") => !job.record.paused,
            Some("paused") => job.record.paused,
            Some("inactive") => !job.active(),
            Some(_) => false,
        };
        name_ok
            && state_ok
            && set(&self.zone).is_none_or(|z| def.zone == z)
            && set(&self.guard).is_none_or(|g| def.guard == g)
    }

    /// The form, with the zones the jobs use to choose from.
    pub(super) fn form(&self, base: &Base, jobs: &[JobStatus]) -> Markup {
        let zones: BTreeSet<&str> = jobs
            .iter()
            .map(|j| j.record.definition.zone.as_str())
            .collect();
        html! {
            form.filters.search method="get" action=(base.home()) role="search" {
                label { "Name" input type="search" name="q" value=(set(&self.q).unwrap_or("")) placeholder="part of a name"; }
                label { "State" (choice("state", set(&self.state), STATES.iter().copied())) }
                label { "Zone" (choice("zone", set(&self.zone), zones.iter().map(|z| (*z, *z)))) }
                label { "Guard" (choice("guard", set(&self.guard), GUARDS.iter().map(|g| (*g, *g)))) }
                button type="submit" { "Filter" }
                @if self.narrows() { a href=(base.home()) { "Clear" } }
            }
        }
    }
}

/// A `select` with "any" first and `current` selected.
fn choice<'a>(
    name: &str,
    current: Option<&str>,
    options: impl Iterator<Item = (&'a str, &'a str)>,
) -> Markup {
    html! {
        select name=(name) {
            option value="" { "any" }
            @for (value, label) in options {
                option value=(value) selected[current == Some(value)] { (label) }
            }
        }
    }
}
