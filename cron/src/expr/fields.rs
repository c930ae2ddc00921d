//! Parsing of the fields of an expression into bit sets: list items with ranges, steps and names, and
//! the day fields' modifiers.

use crate::error::{Field, FieldError, ParseError, shown};

use super::CronExpr;

impl CronExpr {
    /// The day-of-month field: plain items, `L`, `L-n`, `nW` and `LW`.
    pub(super) fn parse_dom(&mut self, text: &str) -> Result<(), ParseError> {
        for item in text.split(',') {
            let err = |reason| field_error(Field::DayOfMonth, item, reason);
            let upper = item.to_ascii_uppercase();
            if upper == "L" {
                self.days_before_last |= 1;
            } else if upper == "LW" {
                self.last_weekday = true;
            } else if let Some(n) = upper.strip_prefix("L-") {
                let n = number(n).map_err(err)?;
                if !(1..=30).contains(&n) {
                    return Err(err(FieldError::OutOfRange {
                        value: n,
                        min: 1,
                        max: 30,
                    }));
                }
                self.days_before_last |= 1 << n;
            } else if let Some(n) = upper.strip_suffix('W') {
                let n = number(n).map_err(err)?;
                check_range(Field::DayOfMonth, n).map_err(err)?;
                self.nearest_weekday |= 1 << n;
            } else if item.contains(['#']) || upper.contains('L') {
                return Err(err(FieldError::ModifierNotAllowed(
                    if item.contains('#') { "#" } else { "L" },
                    "the day-of-week field (`#`) or as `L`, `L-n`, `LW` here",
                )));
            } else {
                self.days |= parse_item(Field::DayOfMonth, item)? as u32;
            }
        }
        Ok(())
    }

    /// The day-of-week field: plain items, `w#n` and `wL`.
    pub(super) fn parse_dow(&mut self, text: &str) -> Result<(), ParseError> {
        for item in text.split(',') {
            let err = |reason| field_error(Field::DayOfWeek, item, reason);
            let upper = item.to_ascii_uppercase();
            if let Some((day, nth)) = upper.split_once('#') {
                let day = weekday_value(day).map_err(err)?;
                let nth = number(nth).map_err(err)?;
                if !(1..=5).contains(&nth) {
                    return Err(err(FieldError::NthOutOfRange(nth)));
                }
                self.nth_weekdays |= 1 << (day * 5 + nth - 1);
            } else if upper.len() > 1
                && let Some(day) = upper.strip_suffix('L')
            {
                self.last_weekdays |= 1 << weekday_value(day).map_err(err)?;
            } else {
                let bits = parse_item(Field::DayOfWeek, item)?;
                // 7 is Sunday too.
                self.weekdays |= ((bits & 0x7f) | ((bits >> 7) & 1)) as u8;
            }
        }
        Ok(())
    }
}

/// Whether a field starts with `*` or `?`.
pub(super) fn starts_with_star(field: &str) -> bool {
    field.starts_with(['*', '?'])
}

fn field_error(field: Field, token: &str, reason: FieldError) -> ParseError {
    ParseError::Field {
        field,
        token: shown(token),
        reason,
    }
}

fn number(text: &str) -> Result<u32, FieldError> {
    if text.is_empty() {
        return Err(FieldError::Empty);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FieldError::NotANumber);
    }
    // Too many digits for u32: saturate, and let the range check report it.
    Ok(text.parse::<u32>().unwrap_or(u32::MAX))
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn value(field: Field, text: &str) -> Result<u32, FieldError> {
    let upper = text.to_ascii_uppercase();
    let named = match field {
        Field::Month => MONTHS
            .iter()
            .position(|m| *m == upper)
            .map(|i| i as u32 + 1),
        Field::DayOfWeek => WEEKDAYS.iter().position(|d| *d == upper).map(|i| i as u32),
        _ => None,
    };
    let v = match named {
        Some(v) => v,
        None => number(text)?,
    };
    check_range(field, v)?;
    Ok(v)
}

fn check_range(field: Field, v: u32) -> Result<(), FieldError> {
    let (min, max) = field.bounds();
    if v < min || v > max {
        return Err(FieldError::OutOfRange { value: v, min, max });
    }
    Ok(())
}

fn weekday_value(text: &str) -> Result<u32, FieldError> {
    value(Field::DayOfWeek, text).map(|v| v % 7)
}

/// A field without modifiers, as a bit set.
pub(super) fn parse_plain(field: Field, text: &str) -> Result<u64, ParseError> {
    let mut bits = 0;
    for item in text.split(',') {
        bits |= parse_item(field, item)?;
    }
    Ok(bits)
}

/// One list item: `*`, `?`, `n`, `a-b`, each optionally `/step`.
fn parse_item(field: Field, item: &str) -> Result<u64, ParseError> {
    let err = |reason| field_error(field, item, reason);
    let (range, step) = match item.split_once('/') {
        Some((range, step)) => {
            let step = number(step).map_err(err)?;
            if step == 0 {
                return Err(err(FieldError::ZeroStep));
            }
            (range, Some(step))
        }
        None => (item, None),
    };
    let (min, max) = field.bounds();
    let (start, end) = if range == "*"
        || (range == "?" && matches!(field, Field::DayOfMonth | Field::DayOfWeek))
    {
        (min, if field == Field::DayOfWeek { 6 } else { max })
    } else if let Some((a, b)) = range.split_once('-') {
        let (a, b) = (value(field, a).map_err(err)?, value(field, b).map_err(err)?);
        if a > b {
            return Err(err(FieldError::RangeReversed { start: a, end: b }));
        }
        (a, b)
    } else {
        let a = value(field, range).map_err(err)?;
        // `5/10` means 5, 15, 25, ... up to the field's maximum.
        (a, if step.is_some() { max } else { a })
    };
    let step = step.unwrap_or(1);
    let mut bits = 0u64;
    let mut v = start;
    while v <= end {
        bits |= 1 << v;
        v = v.saturating_add(step);
    }
    Ok(bits)
}
