//! Typed errors for cron expressions and zones.

use std::fmt;

/// The six fields of a cron expression, named the way a person reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `sec`, only in 6-field expressions.
    Second,
    /// `min`
    Minute,
    /// `hour`
    Hour,
    /// `dom`
    DayOfMonth,
    /// `month`
    Month,
    /// `dow`
    DayOfWeek,
}

impl Field {
    /// The smallest and largest plain number the field accepts.
    pub const fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        })
    }
}

/// Why one field of an expression was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// An empty field or an empty list item (`1,,2`).
    #[error("empty value")]
    Empty,
    /// Neither a number nor a name the field knows.
    #[error("not a number or a known name")]
    NotANumber,
    /// A number outside the field's range.
    #[error("{value} is out of range {min}-{max}")]
    OutOfRange {
        /// The number written.
        value: u32,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
    },
    /// `a-b` with `a > b`; wrapping ranges are not part of the dialect.
    #[error("range {start}-{end} runs backwards (write it as two ranges)")]
    RangeReversed {
        /// Start of the range.
        start: u32,
        /// End of the range.
        end: u32,
    },
    /// `*/0`
    #[error("step must be at least 1")]
    ZeroStep,
    /// `5#6`: there is no sixth weekday of a month.
    #[error("`#` takes 1 to 5 (the n-th weekday of the month), found {0}")]
    NthOutOfRange(u32),
    /// `L`, `W` or `#` where the field does not allow it.
    #[error("`{0}` is only allowed in {1}")]
    ModifierNotAllowed(&'static str, &'static str),
}

/// A cron expression that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing but white space.
    #[error("empty cron expression")]
    Empty,
    /// Neither 5 nor 6 fields.
    #[error(
        "expected 5 fields (min hour dom month dow) or 6 (sec min hour dom month dow), found {found}"
    )]
    FieldCount {
        /// Number of white-space separated fields found.
        found: usize,
    },
    /// An `@` word that is not one of the shorthands.
    #[error(
        "unknown shorthand `{0}`: expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly"
    )]
    UnknownShorthand(String),
    /// One field is malformed.
    #[error("{field} field `{token}`: {reason}")]
    Field {
        /// Which field.
        field: Field,
        /// The offending part of the field, shortened and escaped for display.
        token: String,
        /// What is wrong with it.
        reason: FieldError,
    },
    /// Well formed, but no date in a full 400-year Gregorian cycle matches (`0 0 30 2 *`).
    #[error("`{0}` can never fire: no date matches its day, month and weekday fields")]
    NeverFires(String),
}

/// An IANA zone name that is not in the tz database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone `{name}`{}", suggestion_suffix(.suggestion))]
pub struct UnknownZone {
    /// The name given, shortened and escaped for display.
    pub name: String,
    /// The closest known zone name, when one is close.
    pub suggestion: Option<&'static str>,
}

fn suggestion_suffix(s: &Option<&'static str>) -> String {
    match s {
        Some(s) => format!("; did you mean `{s}`?"),
        None => "; expected an IANA name such as `Asia/Seoul` or `UTC`".to_owned(),
    }
}

/// Shortens and escapes user input so an error message stays readable whatever it was given
/// (10,000 characters, control characters, NUL bytes).
pub(crate) fn shown(input: &str) -> String {
    crate::error::shown_within(input, 48)
}

/// `input` as a person reads it, cut to `max` characters with its length noted, so that an error
/// message quoting it stays one readable line whatever it was given (10,000 characters, control
/// characters, NUL bytes, a bidi override). Quotes and backslashes are left as they are (`x'; DROP`,
/// not Rust's `x\'; DROP`); only control characters (`\n`, `\0`, `\u{1b}`) and invisible
/// format characters (bidi controls, zero-width characters, `\u{202e}`) are written as escapes.
/// Shared by the slotguard crates' error messages.
#[doc(hidden)]
pub fn shown_within(input: &str, max: usize) -> String {
    let mut escaped = String::with_capacity(input.len().min(max * 2));
    for c in input.chars() {
        if c.is_control() {
            escaped.extend(c.escape_debug());
        } else if is_format(c) {
            escaped.extend(c.escape_unicode());
        } else {
            escaped.push(c);
        }
    }
    if escaped.chars().count() <= max {
        escaped
    } else {
        let head: String = escaped.chars().take(max).collect();
        format!("{head}… ({} characters)", input.chars().count())
    }
}

/// Whether `c` is an invisible format character (Unicode category Cf, and the line and paragraph
/// separators): bidi embeddings, overrides and isolates, zero-width characters, the BOM, soft
/// hyphens and the like, which change how text around them reads without showing themselves.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}
