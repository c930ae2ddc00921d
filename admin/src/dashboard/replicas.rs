//! The scheduler processes recorded in the store: alive now, or gone (kept a day after they died).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use maud::{Markup, html};

use super::Ui;
use super::page::{Base, admin_error, frame, html_response, live, utc};
use slotguard::store::ReplicaRecord;

pub(super) async fn page(State(ui): State<Ui>, base: Base) -> Response {
    let replicas = match ui.admin.replicas().await {
        Ok(replicas) => replicas,
        Err(e) => return admin_error(&base, &e),
    };
    let alive = replicas.iter().filter(|r| r.alive).count();
    let body = html! {
        h1 { "Replicas" }
        p { (alive) " alive now, " (replicas.len() - alive) " gone. A process records itself when it \
            starts, refreshes its row on every recovery poll and removes it on a graceful shutdown." }
        (live("replicas", table(&base, &replicas)))
    };
    html_response(StatusCode::OK, frame(&base, "Replicas", body))
}

fn table(base: &Base, replicas: &[ReplicaRecord]) -> Markup {
    html! {
        @if replicas.is_empty() {
            p { "No scheduler process has recorded itself." }
        } @else {
            table.replicas {
                thead { tr {
                    th { "Instance" } th { "State" } th { "Host · pid" } th { "Version" }
                    th { "Roles" } th { "Jobs" } th { "Runs held" } th { "Started" } th { "Heartbeat" }
                } }
                tbody {
                    @for r in replicas {
                        tr {
                            td { code { (r.info.id) } }
                            td {
                                @if r.alive { span.badge.s-active { "alive" } }
                                @else { span.badge.s-dead { "gone" } }
                            }
                            td { (r.info.host) " · " (r.info.pid) }
                            td { (r.info.version) }
                            td { (r.info.roles.join(", ")) }
                            td { @for (i, job) in r.info.jobs.iter().enumerate() {
                                @if i > 0 { ", " }
                                a href=(base.job(job)) { (job) }
                            } }
                            td { (r.info.runs_held) }
                            td { (utc(&r.started_at)) }
                            td { (utc(&r.heartbeat_at)) " · " small { (ago(&r.heartbeat_at)) } }
                        }
                    }
                }
            }
        }
    }
}

/// `3 s ago`, by this process's clock.
fn ago(at: &chrono::DateTime<Utc>) -> String {
    let seconds = (Utc::now() - *at).num_seconds().max(0);
    if seconds < 120 {
        format!("{seconds} s ago")
    } else {
        format!("{} min ago", seconds / 60)
    }
}
