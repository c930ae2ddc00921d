//! The builtin calendars: the files `cron/data/holidays/<CC>.txt`, written by
//! `cron/data/generate_holidays.py` from the python `holidays` package.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use chrono::NaiveDate;

use super::{Calendar, CalendarError, Weekend};

/// The names of the builtin calendars (ISO 3166 country codes).
pub const BUILTIN: [&str; 10] = ["AU", "CA", "CN", "DE", "FR", "GB", "JP", "KR", "SG", "US"];

/// The data of a builtin calendar, by name.
fn data(name: &str) -> Option<&'static str> {
    Some(match name {
        "AU" => include_str!("../../data/holidays/AU.txt"),
        "CA" => include_str!("../../data/holidays/CA.txt"),
        "CN" => include_str!("../../data/holidays/CN.txt"),
        "DE" => include_str!("../../data/holidays/DE.txt"),
        "FR" => include_str!("../../data/holidays/FR.txt"),
        "GB" => include_str!("../../data/holidays/GB.txt"),
        "JP" => include_str!("../../data/holidays/JP.txt"),
        "KR" => include_str!("../../data/holidays/KR.txt"),
        "SG" => include_str!("../../data/holidays/SG.txt"),
        "US" => include_str!("../../data/holidays/US.txt"),
        _ => return None,
    })
}

/// The builtin calendar `name` (case-insensitive), Saturday and Sunday off, read from its data
/// once per process and shared after that.
pub(super) fn shared(name: &str) -> Result<Arc<Calendar>, CalendarError> {
    static READ: [OnceLock<Result<Arc<Calendar>, CalendarError>>; BUILTIN.len()] =
        [const { OnceLock::new() }; BUILTIN.len()];
    let code = name.trim().to_ascii_uppercase();
    let unknown = || CalendarError::Unknown {
        name: name.to_owned(),
    };
    let index = BUILTIN
        .iter()
        .position(|b| *b == code)
        .ok_or_else(unknown)?;
    READ[index]
        .get_or_init(|| {
            let text = data(&code).ok_or_else(unknown)?;
            let (version, years, holidays) = parse(text)?;
            Ok(Arc::new(Calendar {
                name: code,
                version,
                weekend: Weekend::SAT_SUN,
                holidays,
                years,
                bases: Vec::new(),
                closure: Default::default(),
            }))
        })
        .clone()
}

/// The version and years of the header (`# holidays 0.109 KR 2000-2050 …`) and the holidays.
type Parsed = (String, Option<(i32, i32)>, BTreeMap<NaiveDate, String>);

/// Reads a holiday file: one header line, then `YYYY-MM-DD name` lines.
pub(crate) fn parse(text: &str) -> Result<Parsed, CalendarError> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let words: Vec<&str> = header.trim_start_matches('#').split_whitespace().collect();
    let version = words.get(..2).map(|w| w.join(" ")).unwrap_or_default();
    let years = words.get(3).and_then(|span| {
        let (first, last) = span.split_once('-')?;
        Some((first.parse().ok()?, last.parse().ok()?))
    });
    let mut holidays = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let bad = || CalendarError::Data {
            line: i + 2,
            text: line.to_owned(),
        };
        let (date, name) = line.split_once(' ').ok_or_else(bad)?;
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|_| bad())?;
        holidays.insert(date, name.to_owned());
    }
    Ok((version, years, holidays))
}
