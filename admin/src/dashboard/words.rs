//! A cron expression in words, for the common shapes; anything else is left to the expression shown
//! beside it.

/// `every minute`, `every 15 minutes`, `daily at 02:00`, `Mondays at 09:30`, … or `None` when the
/// shape is not one of those.
pub(super) fn describe(cron: &str) -> Option<String> {
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let (second, rest) = match fields.len() {
        5 => ("0", &fields[..]),
        6 => (fields[0], &fields[1..]),
        _ => return None,
    };
    let [minute, hour, dom, month, dow] = rest else {
        return None;
    };
    if *month != "*" {
        return None;
    }
    if second == "*" {
        return (rest.iter().all(|f| *f == "*")).then(|| "every second".to_owned());
    }
    if let Some(n) = step(second) {
        return rest
            .iter()
            .all(|f| *f == "*")
            .then(|| format!("every {n} seconds"));
    }
    if second != "0" {
        return None;
    }
    let days = days(dom, dow)?;
    match (*minute, *hour) {
        ("*", "*") if days == "daily" => Some("every minute".into()),
        (m, "*") if days == "daily" => match step(m) {
            Some(n) => Some(format!("every {n} minutes")),
            None => number(m, 59).map(|m| format!("hourly at minute {m}")),
        },
        (m, h) => {
            let (h, m) = (number(h, 23)?, number(m, 59)?);
            Some(format!("{days} at {h:02}:{m:02}"))
        }
    }
}

/// `*/n` as `n`.
fn step(field: &str) -> Option<u32> {
    field.strip_prefix("*/")?.parse().ok().filter(|n| *n > 1)
}

fn number(field: &str, max: u32) -> Option<u32> {
    field.parse().ok().filter(|n| *n <= max)
}

fn days(dom: &str, dow: &str) -> Option<&'static str> {
    const NAMES: [&str; 7] = [
        "Sundays",
        "Mondays",
        "Tuesdays",
        "Wednesdays",
        "Thursdays",
        "Fridays",
        "Saturdays",
    ];
    match (dom, dow) {
        ("*", "*") => Some("daily"),
        ("*", "1-5") | ("*", "MON-FRI") => Some("weekdays"),
        ("1", "*") => Some("on the 1st of each month"),
        ("*", d) => {
            let i: usize = d.parse().ok()?;
            NAMES.get(i % 7).copied()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn common_shapes_read_as_words() {
        let cases = [
            ("* * * * * *", Some("every second")),
            ("*/5 * * * * *", Some("every 5 seconds")),
            ("* * * * *", Some("every minute")),
            ("*/15 * * * *", Some("every 15 minutes")),
            ("7 * * * *", Some("hourly at minute 7")),
            ("0 2 * * *", Some("daily at 02:00")),
            ("30 9 * * 1", Some("Mondays at 09:30")),
            ("0 18 * * 1-5", Some("weekdays at 18:00")),
            ("0 0 1 * *", Some("on the 1st of each month at 00:00")),
            ("0 2 * 3 *", None),
            ("0 2,14 * * *", None),
            ("<script>", None),
        ];
        for (cron, words) in cases {
            assert_eq!(describe(cron).as_deref(), words, "{cron}");
        }
    }
}
