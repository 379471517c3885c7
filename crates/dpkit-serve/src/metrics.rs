//! The service's metrics, for the people who run it, in the text format
//! Prometheus and the usual monitoring tools read: requests by endpoint and
//! status, how long they took and waited for a worker, the runs under way
//! and waiting, and every account's budget.
//!
//! What they never hold: a data value, a key, SQL text or a path an
//! analyst typed. An endpoint is one of the service's fixed paths (any
//! other is `other`); analysts and datasets are named as the curator named
//! them. Latencies depend on the data a query reads, which is why the
//! metrics are served only on the operators' listener, never to analysts.
//!
//! ```
//! use dpkit_serve::metrics::Metrics;
//! let metrics = Metrics::default();
//! metrics.answered("/v1/query", 200, 0.004);
//! let mut text = String::new();
//! metrics.write(&mut text);
//! assert!(text.contains("dpkit_requests_total{endpoint=\"/v1/query\",status=\"200\"} 1\n"));
//! assert!(text.contains("dpkit_request_duration_seconds_bucket{endpoint=\"/v1/query\",le=\"0.005\"} 1\n"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use dpkit_ledger::BudgetState;

/// The upper bounds of the latency buckets, in seconds.
const BOUNDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The paths counted by name; every other is `other`.
const ENDPOINTS: [&str; 8] = [
    "/v1/datasets",
    "/v1/budget",
    "/v1/explain",
    "/v1/query",
    "/v1/openapi.json",
    "/",
    "/app.js",
    "/style.css",
];

/// Counts of observations at most each bound, their number and sum.
#[derive(Debug, Clone, Default)]
struct Histogram {
    within: [u64; BOUNDS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (within, bound) in self.within.iter_mut().zip(BOUNDS) {
            if seconds <= bound {
                *within += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    /// `name`'s bucket, sum and count lines, `labels` (`key="value",`
    /// pairs, each followed by a comma) on each.
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        for (within, bound) in self.within.iter().zip(BOUNDS) {
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {within}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", self.count);
        let labels = match labels.trim_end_matches(',') {
            "" => String::new(),
            labels => format!("{{{labels}}}"),
        };
        let _ = writeln!(out, "{name}_sum{labels} {}", self.sum);
        let _ = writeln!(out, "{name}_count{labels} {}", self.count);
    }
}

#[derive(Default)]
struct Counts {
    requests: BTreeMap<(&'static str, u16), u64>,
    durations: BTreeMap<&'static str, Histogram>,
    waits: Histogram,
}

/// What the service has done since it started.
#[derive(Default)]
pub struct Metrics {
    counts: Mutex<Counts>,
}

/// `path` as an endpoint label.
fn endpoint(path: &str) -> &'static str {
    ENDPOINTS
        .iter()
        .find(|e| **e == path)
        .copied()
        .unwrap_or("other")
}

impl Metrics {
    /// Counts a request to `path` answered with `status` after `seconds`.
    pub fn answered(&self, path: &str, status: u16, seconds: f64) {
        let endpoint = endpoint(path);
        if let Ok(mut counts) = self.counts.lock() {
            *counts.requests.entry((endpoint, status)).or_default() += 1;
            counts
                .durations
                .entry(endpoint)
                .or_default()
                .observe(seconds);
        }
    }

    /// Counts a run that waited `seconds` for its turn.
    pub fn waited(&self, seconds: f64) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.waits.observe(seconds);
        }
    }

    /// The requests' counts and times, in the text format.
    pub fn write(&self, out: &mut String) {
        let Ok(counts) = self.counts.lock() else {
            return;
        };
        help(
            out,
            "dpkit_requests_total",
            "counter",
            "Requests answered, by endpoint and status.",
        );
        for ((endpoint, status), n) in &counts.requests {
            let _ = writeln!(
                out,
                "dpkit_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {n}"
            );
        }
        let name = "dpkit_request_duration_seconds";
        help(
            out,
            name,
            "histogram",
            "Time from a request's arrival to its answer.",
        );
        for (endpoint, histogram) in &counts.durations {
            histogram.write(out, name, &format!("endpoint=\"{endpoint}\","));
        }
        let name = "dpkit_wait_seconds";
        help(
            out,
            name,
            "histogram",
            "Time a query or explanation waited for a worker.",
        );
        counts.waits.write(out, name, "");
    }
}

/// The runs under way and the requests waiting for a worker.
pub fn write_load(out: &mut String, running: usize, waiting: usize) {
    help(
        out,
        "dpkit_runs",
        "gauge",
        "Queries and explanations running.",
    );
    let _ = writeln!(out, "dpkit_runs {running}");
    help(
        out,
        "dpkit_waiting",
        "gauge",
        "Requests waiting for a worker.",
    );
    let _ = writeln!(out, "dpkit_waiting {waiting}");
}

/// The ledger's writes (charges, refunds, kept answers) and the groups
/// they were committed in, each group one transaction and one fsync.
pub fn write_ledger(out: &mut String, counts: &dpkit_ledger::group::Counts) {
    use std::sync::atomic::Ordering::SeqCst;
    for (name, text, value) in [
        (
            "dpkit_ledger_writes_total",
            "Charges, refunds and kept answers written to the state.",
            counts.written.load(SeqCst),
        ),
        (
            "dpkit_ledger_commits_total",
            "Transactions that wrote them, each one fsync.",
            counts.groups.load(SeqCst),
        ),
    ] {
        help(out, name, "counter", text);
        let _ = writeln!(out, "{name} {value}");
    }
}

/// Each account's budget (`analyst/dataset`, as the state names them).
pub fn write_budgets(out: &mut String, accounts: &[(String, BudgetState)]) {
    type Field = fn(&BudgetState) -> f64;
    let gauges: [(&str, &str, Field); 5] = [
        ("dpkit_budget_total_epsilon", "Total ε granted.", |s| {
            s.total_epsilon
        }),
        ("dpkit_budget_spent_epsilon", "ε spent.", |s| {
            s.spent_epsilon
        }),
        ("dpkit_budget_total_delta", "Total δ granted.", |s| {
            s.total_delta
        }),
        ("dpkit_budget_spent_delta", "δ spent.", |s| s.spent_delta),
        (
            "dpkit_budget_queries",
            "Queries charged and not refunded.",
            |s| s.queries as f64,
        ),
    ];
    for (name, text, field) in gauges {
        help(
            out,
            name,
            "gauge",
            &format!("{text} By analyst and dataset."),
        );
        for (account, state) in accounts {
            let (analyst, dataset) = account.split_once('/').unwrap_or(("", account));
            let _ = writeln!(
                out,
                "{name}{{analyst=\"{}\",dataset=\"{}\"}} {}",
                escaped(analyst),
                escaped(dataset),
                field(state)
            );
        }
    }
}

fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
}

/// A label value as the text format writes it.
fn escaped(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_unknown_paths_are_other() {
        let metrics = Metrics::default();
        for seconds in [0.0005, 0.003, 0.003, 40.0] {
            metrics.answered("/v1/query", 200, seconds);
        }
        metrics.answered("/v1/query?x=SELECT", 404, 0.0);
        metrics.answered("/secret-value", 404, 0.0);
        let mut text = String::new();
        metrics.write(&mut text);
        let line = |l: &str| assert!(text.contains(&format!("{l}\n")), "{l} in\n{text}");
        line("dpkit_request_duration_seconds_bucket{endpoint=\"/v1/query\",le=\"0.001\"} 1");
        line("dpkit_request_duration_seconds_bucket{endpoint=\"/v1/query\",le=\"0.005\"} 3");
        line("dpkit_request_duration_seconds_bucket{endpoint=\"/v1/query\",le=\"30\"} 3");
        line("dpkit_request_duration_seconds_bucket{endpoint=\"/v1/query\",le=\"+Inf\"} 4");
        line("dpkit_request_duration_seconds_count{endpoint=\"/v1/query\"} 4");
        line("dpkit_requests_total{endpoint=\"other\",status=\"404\"} 2");
        assert!(
            !text.contains("SELECT") && !text.contains("secret"),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped_as_the_text_format_says() {
        assert_eq!(escaped("a\\b\"c\nd"), r#"a\\b\"c\nd"#);
    }
}
