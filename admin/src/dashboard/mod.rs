//! A web dashboard over the admin API, behind the cargo feature `dashboard`: server-rendered HTML
//! (maud escapes everything it writes), one stylesheet and one small hand-written script, no
//! front-end framework.
//!
//! # Pages
//!
//! | path | page |
//! | --- | --- |
//! | `/` | every job: schedule in words, zone, DST policy, guard, pause, last outcome, next 3 slots, runs in progress, live replicas running it |
//! | `/jobs/{job}` | a job: its stored schedules, timeline of its recent slots, its runs with their attempts, filters, actions (skip the next slot, add a schedule) |
//! | `/jobs/{job}/runs/{slot}` | a run (`?partition=`): attempts, checkpoint, idempotency key, audit trail, retry and cancel (unskip for an operator's skip ahead) |
//! | `/schedules/{id}` | a stored schedule: its fields, next slots, version history; skip a slot, pause or resume with a note, change the expression or zone, remove |
//! | `/failures` | failed, dead and abandoned runs of every job |
//! | `/missed` | slots with no row, of every job, over a range (`?from=&to=`, default the last hour) |
//! | `/audit` | the audit trail |
//! | `/replicas` | the scheduler processes recorded in the store, alive or gone |
//! | `/holidays` | operators' holiday overrides in force, by calendar and date, with who, why and from when; add a holiday to a calendar, remove one |
//!
//! # Authentication and the operator
//!
//! **The dashboard authenticates no one.** Mount it behind the application's own authentication layer
//! (`examples/axum_server.rs` shows HTTP basic auth), which puts the operator's name in the request as
//! an [`Actor`] extension. Every change is audited under that name; a request without an [`Actor`] can
//! read but not change anything (403).
//!
//! # Changes
//!
//! Every change (retry, cancel, trigger, pause, resume, backfill, retry of a range's failed runs, skip
//! and unskip of a slot, the add, pause, resume, change and removal of a stored schedule, and the
//! add and removal of a holiday on a business calendar) is a
//! form with a required reason, then a confirmation page (for a backfill: the dry run's preview;
//! for an added or changed schedule: its next slots) with a second button. A stored schedule's
//! forms carry the version its page was read at: a form read before someone else's change is
//! refused (409) and changes nothing. The forms
//! carry a CSRF token (random per [`Dashboard`] unless [`Dashboard::csrf_token`] sets one shared by
//! the replicas behind a load balancer); a `POST` without it, or one the browser marks cross-site
//! (`Sec-Fetch-Site`), is refused with 403. [`Dashboard::read_only`] shows no forms and refuses every
//! `POST`.
//!
//! Every answer carries a Content-Security-Policy (`default-src 'none'`, scripts and styles from the
//! dashboard only, `frame-ancestors 'none'`, forms to the dashboard only), `X-Content-Type-Options:
//! nosniff`, `X-Frame-Options: DENY`, `Referrer-Policy: same-origin` and `Cache-Control: no-store`.
//!
//! # Live
//!
//! With JavaScript, the parts of a page marked live are fetched again every few seconds and replaced
//! in place: the scroll position stays, and the forms (outside those parts) keep what is typed in
//! them. Without JavaScript the pages are complete; reload them.
//!
//! ```no_run
//! use axum::Router;
//! use slotguard_admin::Admin;
//! use slotguard_admin::dashboard::Dashboard;
//!
//! # fn app(admin: Admin) -> Router {
//! // Behind the application's authentication layer, which inserts `Actor(operator)`.
//! let app: Router = Router::new().nest("/internal/dashboard", Dashboard::new(admin).router());
//! # app }
//! ```
#![cfg_attr(docsrs, doc(cfg(feature = "dashboard")))]

mod actions;
mod audit;
mod chart;
mod confirm;
mod failures;
mod forms;
mod glance;
mod holiday_changes;
mod holidays;
mod input;
mod job;
mod jobs;
mod missed;
mod page;
mod replicas;
mod run;
mod schedule;
mod schedule_changes;
mod schedules;
mod search;
mod security;
mod timeline;
mod visible;
mod words;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use super::Admin;
#[cfg(doc)]
use super::http::Actor;

/// The dashboard's settings; [`Dashboard::router`] makes the axum router.
#[derive(Debug, Clone)]
pub struct Dashboard {
    admin: Admin,
    read_only: bool,
    csrf_token: String,
}

/// What every handler shares.
#[derive(Debug, Clone)]
struct Ui {
    admin: Admin,
    settings: Arc<Settings>,
}

#[derive(Debug)]
struct Settings {
    read_only: bool,
    csrf_token: String,
}

impl Dashboard {
    /// A dashboard over `admin`, with changes allowed and a random CSRF token.
    pub fn new(admin: Admin) -> Self {
        Dashboard {
            admin,
            read_only: false,
            csrf_token: security::random_token(),
        }
    }

    /// Shows no forms and refuses every change (403), whoever asks.
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The CSRF token the forms carry. Set the same secret on every replica behind one load balancer
    /// (a form from one replica may be posted to another); it must stay secret, and at least 16
    /// characters long (a shorter one is replaced by a random one, with a warning).
    #[must_use]
    pub fn csrf_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        if token.len() >= 16 {
            self.csrf_token = token;
        } else {
            tracing::warn!("slotguard dashboard: a CSRF token under 16 characters was ignored");
        }
        self
    }

    /// The axum router, to [`Router::nest`] under a prefix behind the application's authentication.
    pub fn router(self) -> Router {
        let ui = Ui {
            admin: self.admin,
            settings: Arc::new(Settings {
                read_only: self.read_only,
                csrf_token: self.csrf_token,
            }),
        };
        Router::new()
            .route("/", get(jobs::page))
            .route("/jobs/{job}", get(job::page))
            .route("/jobs/{job}/runs/{slot}", get(run::page))
            .route("/jobs/{job}/{action}", post(actions::submit))
            .route("/schedules/{id}", get(schedule::page))
            .route(
                "/schedules/{id}/{action}",
                post(schedule_changes::on_schedule),
            )
            .route("/failures", get(failures::page))
            .route("/missed", get(missed::page))
            .route("/audit", get(audit::page))
            .route("/replicas", get(replicas::page))
            .route("/holidays", get(holidays::page))
            .route("/holidays/{action}", post(holiday_changes::submit))
            .route("/assets/app.css", get(page::stylesheet))
            .route("/assets/app.js", get(page::script))
            .fallback(page::not_found)
            .layer(axum::middleware::from_fn(security::headers))
            .with_state(ui)
    }
}
