//! Instant fields as the dashboard's forms show them; they are read by [`crate::parse`], as every
//! front end's are.

use chrono::{DateTime, Utc};

use maud::{Markup, html};

pub(super) use crate::parse::{INSTANT_EXAMPLE, instant, maybe_instant, present};

/// An instant as every date field shows it: RFC 3339 in UTC, to the second (the form the runs
/// filter takes too; a browser's `datetime-local` picker would show it in the browser's locale).
pub(super) fn field_value(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A text field for an instant, RFC 3339 in UTC, with `value` (if any) in that form.
pub(super) fn instant_field(
    label: &str,
    name: &str,
    value: Option<&DateTime<Utc>>,
    required: bool,
) -> Markup {
    html! {
        label {
            (label) " (RFC 3339, UTC) "
            input type="text" name=(name) required[required] placeholder=(INSTANT_EXAMPLE)
                pattern=r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?"
                value=(value.map(field_value).unwrap_or_default());
        }
    }
}
