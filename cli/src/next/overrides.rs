//! `slotguard next --calendar NAME` with a store (`--database-url`): the calendar with the
//! operators' holiday overrides in force there, as running schedulers use it. Without a store,
//! `next` reads no database and shows the calendar as shipped.

use slotguard::store::OverrideKind;
use slotguard_cron::Calendar;

use super::calendar::CalendarSpec;
use crate::ops::Store;

/// `spec` (the calendar named `name`) with the store's overrides in force of its calendar and of
/// the calendar it was built on (`--base`), when a store is given; unchanged otherwise, or when
/// `spec` is not a calendar the overrides can apply to. A failure is its exit code and message.
pub(super) fn with_overrides(
    spec: Option<CalendarSpec>,
    name: Option<&str>,
    store: &Store,
) -> Result<Option<CalendarSpec>, (u8, String)> {
    let (Some(spec), Some(_)) = (spec.clone(), name) else {
        return Ok(spec);
    };
    let Some(read) = store.calendar_overrides() else {
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
    // Those of the calendar `name` names, and of the builtin one a holidays file is built on; any
    // other leaves it as it is.
    for o in &read? {
        let holiday = match o.spec.kind {
            OverrideKind::Add => Some(o.spec.name.as_str()),
            OverrideKind::Remove => None,
        };
        calendar = calendar.with_override(&o.spec.calendar, o.spec.date, holiday);
    }
    Ok(Some(CalendarSpec::File(calendar)))
}
