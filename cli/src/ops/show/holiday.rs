//! How holiday overrides are printed. `--json`'s object is the HTTP router's
//! (`GET /calendar-overrides`), field for field.

use serde_json::{Value, json};
use slotguard::store::CalendarOverride;

use super::{lines, table, ts};

/// `holiday add|remove`: what was stored and from when running schedulers follow it.
pub(in crate::ops) fn holiday_written(o: &CalendarOverride) -> String {
    let what = match o.spec.kind {
        slotguard::store::OverrideKind::Add => format!("a holiday ({})", super::cell(&o.spec.name)),
        slotguard::store::OverrideKind::Remove => "no holiday".to_owned(),
    };
    format!(
        "{} {} is {what} from {} (stored by {}; running schedulers follow it from then)\n",
        super::cell(&o.spec.calendar),
        o.spec.date,
        ts(&o.effective_at),
        super::cell(&o.changed_by),
    )
}

/// `holiday list`: the overrides in force, by calendar and date.
pub(in crate::ops) fn holidays(overrides: &[CalendarOverride], json: bool) -> String {
    if json {
        return lines(overrides.iter().map(override_json));
    }
    let rows: Vec<Vec<String>> = overrides
        .iter()
        .map(|o| {
            vec![
                o.spec.calendar.clone(),
                o.spec.date.to_string(),
                o.spec.kind.as_str().to_owned(),
                o.spec.name.clone(),
                o.changed_by.clone(),
                ts(&o.effective_at),
                o.reason.clone(),
            ]
        })
        .collect();
    table(
        &["CALENDAR", "DATE", "KIND", "NAME", "BY", "FROM", "REASON"],
        &rows,
    )
}

fn override_json(o: &CalendarOverride) -> Value {
    json!({
        "calendar": o.spec.calendar,
        "date": o.spec.date,
        "kind": o.spec.kind.as_str(),
        "name": o.spec.name,
        "reason": o.reason,
        "changedBy": o.changed_by,
        "changedAt": o.changed_at,
        "effectiveAt": o.effective_at,
    })
}
