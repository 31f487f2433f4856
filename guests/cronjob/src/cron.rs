//! Standard cron schedules (five fields: minute, hour, day of month, month, day of week),
//! in UTC, with no clock of their own: the decision hands in the host's time.
//!
//! The syntax is the one the tutorial's parser (`cron.ParseStandard`) accepts: `*` and `?`,
//! numbers, names of months (`JAN`) and weekdays (`SUN`), ranges `a-b`, steps `*/n`,
//! `a-b/n` and `a/n` (from `a` to the end), lists `a,b`, and the descriptors `@yearly`,
//! `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly`. When both day
//! fields are restricted a day matching either runs; when one is `*`, both must match.

/// How far ahead a schedule is searched for its next time, in years (an impossible date
/// such as 30 February has none).
const SEARCH_YEARS: i64 = 5;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// A parsed schedule: the allowed values of each field as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    minute: u64,
    hour: u64,
    day_of_month: u64,
    month: u64,
    day_of_week: u64,
    /// Whether a day field was `*` (or `?`): then the two day fields must both match.
    day_of_month_star: bool,
    day_of_week_star: bool,
}

/// The five fields a descriptor stands for.
fn descriptor(text: &str) -> Option<&'static str> {
    Some(match text {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

/// The five fields of a schedule, descriptors expanded; `None` if it has not five.
pub fn fields(text: &str) -> Option<[String; 5]> {
    let text = text.trim();
    let expanded = descriptor(text).unwrap_or(text);
    let parts: Vec<String> = expanded.split_whitespace().map(str::to_string).collect();
    parts.try_into().ok()
}

struct Bounds {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// The value of the first name (months count from 1).
    first_name: u32,
}

const MINUTE: Bounds = Bounds {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    first_name: 0,
};
const HOUR: Bounds = Bounds {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    first_name: 0,
};
const DAY_OF_MONTH: Bounds = Bounds {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
    first_name: 0,
};
const MONTH: Bounds = Bounds {
    name: "month",
    min: 1,
    max: 12,
    names: &MONTHS,
    first_name: 1,
};
const DAY_OF_WEEK: Bounds = Bounds {
    name: "day of week",
    min: 0,
    max: 6,
    names: &WEEKDAYS,
    first_name: 0,
};

fn value(text: &str, b: &Bounds) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + b.first_name);
    }
    let n: u32 = text
        .parse()
        .map_err(|_| format!("{}: `{text}` is not a number", b.name))?;
    if n < b.min || n > b.max {
        return Err(format!(
            "{}: {n} is out of range {}-{}",
            b.name, b.min, b.max
        ));
    }
    Ok(n)
}

/// One field's bits, and whether it was `*`.
fn field(text: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("{}: `{s}` is not a step", b.name))?;
                if step == 0 {
                    return Err(format!("{}: a step of 0", b.name));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (start, end, is_star) = if range == "*" || range == "?" {
            (b.min, b.max, true)
        } else if let Some((lo, hi)) = range.split_once('-') {
            (value(lo, b)?, value(hi, b)?, false)
        } else {
            let v = value(range, b)?;
            (v, if step.is_some() { b.max } else { v }, false)
        };
        if start > end {
            return Err(format!("{}: {start}-{end} is an empty range", b.name));
        }
        let step = step.unwrap_or(1);
        star |= is_star && step == 1;
        for v in (start..=end).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Ok((bits, star))
}

impl Schedule {
    /// Parses a schedule.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let Some(f) = fields(text) else {
            return Err(format!(
                "`{}` is not a schedule: expected five fields or a descriptor such as @daily",
                text.trim()
            ));
        };
        let (minute, _) = field(&f[0], &MINUTE)?;
        let (hour, _) = field(&f[1], &HOUR)?;
        let (day_of_month, day_of_month_star) = field(&f[2], &DAY_OF_MONTH)?;
        let (month, _) = field(&f[3], &MONTH)?;
        let (day_of_week, day_of_week_star) = field(&f[4], &DAY_OF_WEEK)?;
        Ok(Schedule {
            minute,
            hour,
            day_of_month,
            month,
            day_of_week,
            day_of_month_star,
            day_of_week_star,
        })
    }

    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let dom = self.day_of_month & (1 << day) != 0;
        let dow = self.day_of_week & (1 << weekday) != 0;
        if self.day_of_month_star || self.day_of_week_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first time of the schedule strictly after `unix_ms` (milliseconds since the
    /// epoch, a whole minute), or `None` if there is none within five years.
    pub fn next_after(&self, unix_ms: i64) -> Option<i64> {
        let mut minute = unix_ms.div_euclid(60_000) + 1;
        let (first_year, _, _) = civil_from_days(minute.div_euclid(1440));
        loop {
            let days = minute.div_euclid(1440);
            let (year, month, day) = civil_from_days(days);
            if year > first_year + SEARCH_YEARS {
                return None;
            }
            if self.month & (1 << month) == 0 {
                let (y, m) = if month == 12 {
                    (year + 1, 1)
                } else {
                    (year, month + 1)
                };
                minute = days_from_civil(y, m, 1) * 1440;
                continue;
            }
            let weekday = (days + 4).rem_euclid(7) as u32;
            if !self.day_matches(day, weekday) {
                minute = (days + 1) * 1440;
                continue;
            }
            let of_day = minute.rem_euclid(1440);
            let hour = of_day / 60;
            if self.hour & (1 << hour) == 0 {
                minute = days * 1440 + (hour + 1) * 60;
                continue;
            }
            if self.minute & (1 << (of_day % 60)) == 0 {
                minute += 1;
                continue;
            }
            return Some(minute * 60_000);
        }
    }
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01: year, month (1-12), day (1-31).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_sdk::k8s::{parse_rfc3339, rfc3339};

    fn next(schedule: &str, after: &str) -> String {
        let s = Schedule::parse(schedule).unwrap();
        rfc3339(s.next_after(parse_rfc3339(after).unwrap()).unwrap())
    }

    #[test]
    fn calendar_round_trips() {
        for days in [-800_000, -1, 0, 59, 60, 11_016, 20_454, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(
            days_from_civil(2024, 2, 29) + 1,
            days_from_civil(2024, 3, 1)
        );
    }

    #[test]
    fn next_times() {
        let cases = [
            ("* * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"),
            ("* * * * *", "2026-01-01T00:00:30Z", "2026-01-01T00:01:00Z"),
            (
                "*/1 * * * *",
                "2026-01-01T00:59:59Z",
                "2026-01-01T01:00:00Z",
            ),
            (
                "*/15 * * * *",
                "2026-01-01T00:15:00Z",
                "2026-01-01T00:30:00Z",
            ),
            ("5 4 * * *", "2026-01-01T04:05:00Z", "2026-01-02T04:05:00Z"),
            ("0 0 1 * *", "2026-01-15T10:00:00Z", "2026-02-01T00:00:00Z"),
            ("0 0 29 2 *", "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z"),
            (
                "0 9 * * MON-FRI",
                "2026-01-02T09:00:00Z",
                "2026-01-05T09:00:00Z",
            ),
            (
                "0 9 * * 1-5",
                "2026-01-03T12:00:00Z",
                "2026-01-05T09:00:00Z",
            ),
            (
                "30 2 * JAN,jul *",
                "2026-02-01T00:00:00Z",
                "2026-07-01T02:30:00Z",
            ),
            (
                "0 12 ? * sun",
                "2026-01-01T00:00:00Z",
                "2026-01-04T12:00:00Z",
            ),
            (
                "0-10/5 3 * * *",
                "2026-01-01T03:05:00Z",
                "2026-01-01T03:10:00Z",
            ),
            (
                "50/5 * * * *",
                "2026-01-01T00:56:00Z",
                "2026-01-01T01:50:00Z",
            ),
            ("@hourly", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"),
            ("@daily", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"),
            ("@weekly", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"),
            ("@monthly", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"),
            ("@yearly", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"),
            (
                "0 0 31 12 *",
                "2026-12-31T00:00:00Z",
                "2027-12-31T00:00:00Z",
            ),
        ];
        for (schedule, after, want) in cases {
            assert_eq!(next(schedule, after), want, "{schedule} after {after}");
        }
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        // The 13th or any Friday: 2026-02-06 is a Friday before the 13th.
        assert_eq!(
            next("0 0 13 * 5", "2026-02-01T00:00:00Z"),
            "2026-02-06T00:00:00Z"
        );
        // With a `*` day of week only the day of month counts.
        assert_eq!(
            next("0 0 13 * *", "2026-02-01T00:00:00Z"),
            "2026-02-13T00:00:00Z"
        );
        // A stepped `*` is a restriction: either field.
        assert_eq!(
            next("0 0 */10 * 0", "2026-01-02T00:00:00Z"),
            "2026-01-04T00:00:00Z"
        );
    }

    #[test]
    fn impossible_dates_have_no_next_time() {
        let s = Schedule::parse("0 0 30 2 *").unwrap();
        assert_eq!(s.next_after(0), None);
    }

    #[test]
    fn bad_schedules_are_refused() {
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "*/0 * * * *",
            "5-1 * * * *",
            "a * * * *",
            "* * * FOO *",
            "@every 5m",
            "@reboot",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad:?} parsed");
        }
        let e = Schedule::parse("61 * * * *").unwrap_err();
        assert!(e.contains("minute"), "{e}");
    }

    #[test]
    fn fields_expand_descriptors() {
        assert_eq!(
            fields("@daily").unwrap(),
            ["0", "0", "*", "*", "*"].map(String::from)
        );
        assert_eq!(
            fields(" */5  1 * * 0 ").unwrap(),
            ["*/5", "1", "*", "*", "0"].map(String::from)
        );
        assert!(fields("* *").is_none());
    }
}
