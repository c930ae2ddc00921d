//! Instants and optional fields as the dashboard's forms send them.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use maud::{Markup, html};

use crate::{AdminError, shown};

/// An empty field is an absent one.
pub(super) fn present(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// An instant: RFC 3339 (`2026-03-07T17:00:00Z`), or a UTC wall time as a browser's
/// `datetime-local` input sends it (`2026-03-07T17:00`, seconds optional), or a UTC date.
pub(super) fn instant(field: &'static str, text: &str) -> Result<DateTime<Utc>, AdminError> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(wall) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(wall.and_utc());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    Err(AdminError::Invalid {
        field,
        problem: format!(
            "`{}` is not an instant such as 2026-03-07T17:00:00Z or 2026-03-07T17:00 (UTC)",
            shown(text)
        ),
    })
}

/// An optional instant.
pub(super) fn maybe_instant(
    field: &'static str,
    text: Option<&str>,
) -> Result<Option<DateTime<Utc>>, AdminError> {
    present(text).map(|t| instant(field, t)).transpose()
}

/// The example every date field shows: the form the fields take and show, RFC 3339 in UTC.
pub(super) const INSTANT_EXAMPLE: &str = "2026-03-07T17:00:00Z";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_send_instants_in_several_shapes() {
        let want: DateTime<Utc> = "2026-03-07T17:00:00Z".parse().unwrap();
        for text in [
            "2026-03-07T17:00:00Z",
            "2026-03-08T02:00:00+09:00",
            "2026-03-07T17:00",
            " 2026-03-07T17:00:00 ",
        ] {
            assert_eq!(instant("from", text), Ok(want), "{text}");
        }
        assert_eq!(
            instant("from", "2026-03-07").unwrap(),
            "2026-03-07T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        let error = instant("to", "<b>soon</b>").unwrap_err();
        assert!(matches!(error, AdminError::Invalid { field: "to", .. }));
        assert_eq!(maybe_instant("to", Some("  ")), Ok(None));
    }
}
