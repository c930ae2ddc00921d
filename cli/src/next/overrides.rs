//! `slotguard next --calendar NAME` with a store (`--database-url`): the calendar with the
//! operators' holiday overrides in force there, as running schedulers use it. Without a store,
//! `next` reads no database and shows the calendar as shipped.

use slotguard::store::OverrideKind;
use slotguard_cron::Calendar;

use super::calendar::CalendarSpec;
use crate::ops::Store;

/// `spec` (the calendar named `name`) with the store's overrides of `name`, when a store is
/// given; unchanged otherwise, or when `spec` is not a calendar the overrides can apply to. A
/// failure is its exit code and message.
pub(super) fn with_overrides(
    spec: Option<CalendarSpec>,
    name: Option<&str>,
    store: &Store,
) -> Result<Option<CalendarSpec>, (u8, String)> {
    let (Some(spec), Some(name)) = (spec.clone(), name) else {
        return Ok(spec);
    };
    let Some(read) = store.calendar_overrides(name) else {
        return Ok(Some(spec));
    };
    let mut calendar = match spec {
        CalendarSpec::Builtin(name) => match Calendar::builtin(&name) {
            Ok(calendar) => calendar,
            // Unknown: the request reports it as it would without a store.
            Err(_) => return Ok(Some(CalendarSpec::Builtin(name))),
        },
        CalendarSpec::File(calendar) => calendar,
        inline @ CalendarSpec::Inline(_) => return Ok(Some(inline)),
    };
    for o in read? {
        calendar = match o.spec.kind {
            OverrideKind::Add => calendar.with_holiday(o.spec.date, o.spec.name),
            OverrideKind::Remove => calendar.without_holiday(o.spec.date),
        };
    }
    Ok(Some(CalendarSpec::File(calendar)))
}
