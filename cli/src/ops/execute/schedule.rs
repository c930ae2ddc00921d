//! Carrying out a [`SchedulePlan`], a skip or an unskip: one call of the admin API's schedule
//! methods each, a refused field named as the CLI's argument is.

use chrono::{DateTime, Utc};
use slotguard_admin::{Admin, AdminError, ChangeRequest};

use super::super::failure::{Failure, SCHEDULE_ARGS, SKIP_ARGS, fields};
use super::super::plan::SchedulePlan;
use super::super::{NOT_FOUND, show};

impl SchedulePlan {
    /// Asks the store, and renders the answer.
    pub(in crate::ops) async fn execute(self, admin: &Admin) -> Result<String, Failure> {
        let named = fields(SCHEDULE_ARGS);
        Ok(match self {
            SchedulePlan::Add { id, fields, by } => {
                let added = admin.add_schedule(&id, fields, &by).await;
                show::schedule_changed("added", &added.map_err(named)?)
            }
            SchedulePlan::List {
                job,
                after,
                limit,
                json,
            } => {
                let page = admin
                    .schedules(job.as_deref(), after.as_deref(), limit)
                    .await;
                show::schedules(&page.map_err(named)?, limit, json)
            }
            SchedulePlan::Show { id, json } => show::schedule(&admin.schedule(&id).await?, json),
            SchedulePlan::Set {
                id,
                version,
                fields,
                by,
            } => {
                let changed = admin.change_schedule(&id, version, fields, &by).await;
                show::schedule_changed("changed", &changed.map_err(named)?)
            }
            SchedulePlan::Remove { id, version, by } => {
                show::schedule_removed(&admin.remove_schedule(&id, version, &by).await?)
            }
            SchedulePlan::Preview {
                fields,
                count,
                json,
            } => {
                let slots = admin.preview_schedule(fields.clone(), count).await;
                show::preview(&fields, &slots.map_err(named)?, json)
            }
        })
    }
}

/// `skip` of an upcoming slot, or with `undo` its `unskip`.
pub(super) async fn skip(
    admin: &Admin,
    (job, slot, partition): (&str, DateTime<Utc>, &str),
    by: &ChangeRequest,
    undo: bool,
) -> Result<String, Failure> {
    let named = fields(SKIP_ARGS);
    if !undo {
        let run = admin.skip(job, slot, partition, by).await.map_err(named)?;
        return Ok(show::skipped(&run));
    }
    match admin.unskip(job, slot, partition, by).await {
        Ok(()) => Ok(show::unskipped(job, slot, partition)),
        // The slot has no operator's skip: said as such, not as a missing run.
        Err(AdminError::UnknownRun { .. }) => Err(Failure {
            code: NOT_FOUND,
            message: format!(
                "job `{}` slot {}{} has no skip to undo: it was not skipped, or a replica has claimed it since",
                show::shown(job),
                show::ts(&slot),
                if partition.is_empty() {
                    String::new()
                } else {
                    format!(" (partition `{}`)", show::shown(partition))
                }
            ),
        }),
        Err(other) => Err(named(other)),
    }
}
