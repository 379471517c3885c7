//! `dpkit audit`: the empirical privacy auditor from the command line.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Parser;
use dpkit_audit::{
    AuditReport, AuditSettings, AuditTarget, NeighbouringOutputs, OutputEvent, RunAudit,
    TargetParameters, audit,
};
use dpkit_core::rng::{InsecureSeededRng, SecureRng};
use dpkit_plot::{HistogramFigure, HistogramSeries, draw};

/// Process exit code when the audit finds a violation.
pub const VIOLATION_EXIT_CODE: u8 = 3;

#[derive(Parser)]
#[command(allow_negative_numbers = true)]
pub struct AuditArgs {
    /// The mechanism to audit.
    #[arg(long, required_unless_present = "query", value_parser = clap::builder::PossibleValuesParser::new(AuditTarget::ALL.map(AuditTarget::name)))]
    mechanism: Option<String>,
    /// Audit a private SQL query end to end instead: it runs on the table of
    /// --description and on the neighbouring table of --neighbour.
    #[arg(long, conflicts_with = "mechanism", requires_all = ["description", "neighbour"])]
    query: Option<String>,
    /// The data description of the first table (with --query).
    #[arg(long, value_name = "FILE")]
    description: Option<PathBuf>,
    /// The data description of a neighbouring table: one person added,
    /// removed or changed (with --query).
    #[arg(long, value_name = "FILE")]
    neighbour: Option<PathBuf>,
    /// The answer's column the auditor watches, counted from 0 (with --query).
    #[arg(long, default_value_t = 0)]
    column: usize,
    /// The GROUP BY keys of the watched row, one per key (with --query;
    /// none: the only row). A row that is not released counts as its own output.
    #[arg(long)]
    key: Vec<String>,
    /// The ε the mechanism is built with and must keep.
    #[arg(long)]
    epsilon: f64,
    /// δ, for the gaussian mechanisms.
    #[arg(long)]
    delta: Option<f64>,
    /// Sensitivity Δ: the two inputs are Δ apart (a whole number for integer mechanisms).
    #[arg(long, default_value_t = 1.0)]
    sensitivity: f64,
    /// Outputs drawn per input (half choose the event, half test it); more
    /// samples find smaller violations.
    #[arg(long, default_value_t = 200_000)]
    samples: usize,
    /// Confidence of the lower bound on the realised ε.
    #[arg(long, default_value_t = 0.99)]
    confidence: f64,
    /// Seed for a reproducible audit (default: a fresh OS seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Also draw the two output distributions and the separating event to
    /// PATH.png and PATH.svg.
    #[arg(long, value_name = "PATH")]
    plot: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
}

#[derive(Clone, Copy, clap::ValueEnum, PartialEq)]
enum ReportFormat {
    /// A table for people
    Text,
    /// One JSON object for scripts
    Json,
}

/// One line on standard error saying what a long run is doing, written
/// only when a person is watching (standard error is a terminal).
fn stage(text: &str) {
    use std::io::{IsTerminal, Write};
    let mut stderr = std::io::stderr().lock();
    if stderr.is_terminal() {
        let _ = writeln!(stderr, "dpkit: {text}…");
    }
}

/// Runs the audit, prints the report; `Ok(true)` when a violation was found.
pub fn run(args: &AuditArgs) -> Result<bool> {
    let settings = AuditSettings {
        samples_per_input: args.samples,
        confidence: args.confidence,
    };
    settings.validate()?;
    if let Some(sql) = &args.query {
        return run_query(args, sql);
    }
    let name = args.mechanism.as_deref().unwrap_or_default();
    let target = AuditTarget::from_name(name).context("unknown mechanism")?;
    let parameters = TargetParameters {
        epsilon: args.epsilon,
        delta: args.delta,
        sensitivity: args.sensitivity,
    };
    stage(&format!(
        "drawing {} outputs from each of two neighbouring inputs",
        args.samples
    ));
    let outputs = match args.seed {
        Some(seed) => target.run(
            parameters,
            args.samples,
            &mut InsecureSeededRng::from_seed_for_testing(seed),
        )?,
        None => target.run(parameters, args.samples, &mut SecureRng::from_os()?)?,
    };
    stage("looking for the event that tells the inputs apart most");
    let report = audit(&outputs, &settings)?;
    let figure_paths = match &args.plot {
        Some(stem) => Some(draw(&figure(&outputs, &report)?, stem)?),
        None => None,
    };
    match args.format {
        ReportFormat::Text => {
            let mut text = text_report(&report);
            if let Some([png, svg]) = &figure_paths {
                text.push_str(&format!(
                    "{:<24} {} and {}\n",
                    "figure",
                    png.display(),
                    svg.display()
                ));
            }
            crate::write_stdout(&text)?;
        }
        ReportFormat::Json => {
            let mut json = json_report(&report);
            if let Some([png, svg]) = &figure_paths {
                json["figure"] = serde_json::json!([png, svg]);
            }
            crate::write_stdout(&crate::json_text(&json))?;
        }
    }
    Ok(report.violation_found())
}

/// `dpkit audit --query`: the query on two neighbouring tables, through the
/// whole query path (`dpkit_audit::query`).
fn run_query(args: &AuditArgs, sql: &str) -> Result<bool> {
    use dpkit_audit::query::{QueryAudit, audit_query, cell};
    use dpkit_query::{Description, MechanismChoice, QueryEngine, ReleaseSettings};
    if args.plot.is_some() {
        bail!("--plot draws mechanism audits only");
    }
    let open = |path: &Option<PathBuf>| -> Result<QueryEngine> {
        let path = path
            .as_ref()
            .context("--query needs --description and --neighbour")?;
        Ok(QueryEngine::open(Description::load(path)?)?)
    };
    let (first, second) = (open(&args.description)?, open(&args.neighbour)?);
    let audit = QueryAudit {
        sql,
        settings: ReleaseSettings {
            epsilon: args.epsilon,
            delta: args.delta.unwrap_or(0.0),
            mechanism: MechanismChoice::Auto,
            confidence: 0.95,
        },
        samples: args.samples,
        confidence: args.confidence,
    };
    let keys: Vec<&str> = args.key.iter().map(String::as_str).collect();
    let statistic = |table: &dpkit_query::ReleasedTable| cell(table, &keys, args.column);
    let report = match args.seed {
        Some(seed) => audit_query(
            &first,
            &second,
            &audit,
            &statistic,
            &mut InsecureSeededRng::from_seed_for_testing(seed),
        )?,
        None => audit_query(
            &first,
            &second,
            &audit,
            &statistic,
            &mut SecureRng::from_os()?,
        )?,
    };
    match args.format {
        ReportFormat::Text => crate::write_stdout(&text_report(&report))?,
        ReportFormat::Json => crate::write_stdout(&format!("{}\n", json_report(&report)))?,
    }
    Ok(report.violation_found())
}

fn text_report(report: &AuditReport) -> String {
    format!("dpkit audit\n{report}")
}

fn json_report(report: &AuditReport) -> serde_json::Value {
    let (p_first, p_second) = report.event_probabilities();
    let finite = |x: f64| x.is_finite().then_some(x);
    serde_json::json!({
        "mechanism": report.mechanism,
        "declared_epsilon": report.declared.epsilon(),
        "declared_delta": report.declared.delta(),
        "first_input": report.first_input,
        "second_input": report.second_input,
        "samples_per_input": report.samples_per_input,
        "confidence": report.confidence,
        "event": report.event.to_string(),
        "event_probability_first": p_first,
        "event_probability_second": p_second,
        "event_favours": if report.favours_first { "first" } else { "second" },
        "epsilon_estimate": finite(report.epsilon_estimate),
        "epsilon_lower_bound": report.epsilon_lower_bound,
        "violation_found": report.violation_found(),
    })
}

/// Histograms of both output samples, with the separating event shaded.
fn figure(outputs: &NeighbouringOutputs, report: &AuditReport) -> Result<HistogramFigure> {
    let mut pooled: Vec<f64> = outputs
        .first
        .iter()
        .chain(&outputs.second)
        .copied()
        .collect();
    pooled.sort_unstable_by(f64::total_cmp);
    let mut distinct = pooled.clone();
    distinct.dedup();
    let edges: Vec<f64> = if distinct.len() <= 60 {
        // One bar per output value, as wide as the closest gap allows.
        let gap = distinct
            .windows(2)
            .map(|w| w[1] - w[0])
            .fold(f64::INFINITY, f64::min);
        let half = if gap.is_finite() { 0.4 * gap } else { 0.4 };
        distinct
            .iter()
            .flat_map(|&v| [v - half, v + half])
            .collect()
    } else {
        // The middle 99% of the outputs, and the event's edges: the figure
        // shows the event even when it lies in the tails.
        let middle = (
            pooled[pooled.len() / 200],
            pooled[pooled.len() - 1 - pooled.len() / 200],
        );
        let edges = report.event.spans().unwrap_or_default().into_iter();
        let (low, high) = edges
            .flat_map(|(a, b)| [a, b])
            .filter(|v| v.is_finite())
            .fold(middle, |(l, h), v| (l.min(v), h.max(v)));
        if low.partial_cmp(&high) != Some(std::cmp::Ordering::Less) {
            bail!("the outputs are too concentrated to draw");
        }
        (0..=80)
            .map(|k| low + (high - low) * k as f64 / 80.0)
            .collect()
    };
    let bars: Vec<(f64, f64)> = if distinct.len() <= 60 {
        edges.chunks(2).map(|pair| (pair[0], pair[1])).collect()
    } else {
        edges.windows(2).map(|pair| (pair[0], pair[1])).collect()
    };
    let series = |name: &str, sample: &[f64]| {
        let n = sample.len() as f64;
        let mut counts = vec![0u64; bars.len()];
        for &y in sample {
            if let Some(index) = bars.iter().position(|&(l, r)| l <= y && y <= r) {
                counts[index] += 1;
            }
        }
        HistogramSeries {
            name: name.to_string(),
            bins: bars
                .iter()
                .zip(counts)
                .map(|(&(l, r), c)| (l, r, c as f64 / n))
                .collect(),
        }
    };
    let (highlight, label) = match &report.event {
        OutputEvent::GridResidue { max_magnitude, .. } => (
            vec![(-max_magnitude, *max_magnitude)],
            format!("event: {} (only some outputs here)", report.event),
        ),
        event => {
            let widen = if distinct.len() <= 60 {
                bars.first().map_or(0.0, |&(l, r)| (r - l) / 2.0)
            } else {
                0.0
            };
            let spans = event.spans().unwrap_or_default();
            (
                spans
                    .into_iter()
                    .map(|(a, b)| (a - widen, b + widen))
                    .collect(),
                format!("event: {}", report.event),
            )
        }
    };
    Ok(HistogramFigure {
        title: format!(
            "{} at ε = {}: outputs from two neighbouring inputs",
            report.mechanism,
            report.declared.epsilon()
        ),
        x_label: "released value y".into(),
        y_label: "share of outputs".into(),
        series: vec![
            series(&report.first_input, &outputs.first),
            series(&report.second_input, &outputs.second),
        ],
        highlight,
        highlight_label: label,
    })
}
