//! Where and when the lab ran: timings are only comparable on one machine
//! on one day, so the report names both.

/// The CPU's model name and its number of logical cores, as Linux reports
/// them (`/proc/cpuinfo`), or "an unknown CPU" elsewhere.
///
/// ```
/// let cpu = dpkit_lab::machine::cpu();
/// let (_, cores) = cpu.rsplit_once(", ").unwrap();
/// assert!(cores.split(' ').next().unwrap().parse::<usize>().unwrap() >= 1);
/// ```
pub fn cpu() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".into());
    let plural = if cores == 1 { "" } else { "s" };
    format!("{model}, {cores} logical core{plural}")
}

/// Today's date in UTC, `YYYY-MM-DD`.
///
/// ```
/// let today = dpkit_lab::machine::today();
/// assert_eq!((today.len(), &today[4..5], &today[7..8]), (10, "-", "-"));
/// ```
pub fn today() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_date((seconds / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`: eras of 400 years, years starting in March).
///
/// ```
/// use dpkit_lab::machine::civil_date;
/// assert_eq!(civil_date(0), (1970, 1, 1));
/// assert_eq!(civil_date(20_784), (2026, 11, 27));
/// assert_eq!(civil_date(11_016), (2000, 2, 29));
/// ```
pub fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + 400 * era + i64::from(month <= 2);
    (year, month, day)
}
