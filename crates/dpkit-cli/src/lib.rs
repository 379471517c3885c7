#![forbid(unsafe_code)]
//! `dpkit`: differentially private releases from the command line.
//!
//! The `dpkit` binary is [`run`] over the process's arguments; the Python
//! wheel's `dpkit` command calls the same function, so both are one tool.
//! Errors are `anyhow` inside: this library is a binary's body, and its only
//! interface is the exit status and what it writes.

mod audit;
mod check;
mod lab;
mod query;
mod serve;
mod synth;

use std::ffi::OsString;
use std::io::{self, BufRead, BufWriter, IsTerminal, Write};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use dpkit_core::mechanism::{AdditiveNoise, Input, MechanismKind, Staircase, StaircaseGamma};
use dpkit_core::rng::with_thread_secure_rng;

#[derive(Parser)]
#[command(
    name = "dpkit",
    version,
    about = "Differentially private statistics: noise mechanisms with error bars"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Privatize numbers (one per line on standard input, or a CSV column)
    /// and print each released value with its error bar.
    ///
    /// Every value is released separately at the given ε: releasing n values
    /// about the same people costs n·ε (sequential composition).
    Noise(NoiseArgs),
    /// Audit a mechanism empirically: run it on two neighbouring inputs many
    /// times, find the output event that best separates them, and report a
    /// lower confidence bound on the ε it really provides.
    ///
    /// Exit status: 0 when no violation is found, 3 when the lower bound
    /// exceeds the declared ε, 2 on an error. A pass is evidence, not proof:
    /// only the searched events, the two inputs and the drawn samples are seen.
    Audit(audit::AuditArgs),
    /// Run the lab's experiments: figures (PNG and SVG), their numbers
    /// (CSV) and a report.md comparing the mechanisms on speed and accuracy.
    Lab(lab::LabArgs),
    /// Answer a SQL query privately: COUNT, SUM, AVG, VAR, STDDEV, MIN, MAX,
    /// MEDIAN and percentiles, per group, with
    /// confidence intervals, charged to the analyst's budget ledger.
    ///
    /// Example: dpkit query --description data/adult/adult.toml --epsilon 0.5
    /// "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex"
    Query(query::QueryArgs),
    /// Show an analyst's spent and remaining budget for a dataset.
    Budget(query::BudgetArgs),
    /// Draft a data description (TOML) from a CSV file's header, for a person
    /// to complete with public bounds and domains.
    Describe(query::DescribeArgs),
    /// Read a description's data file against it, before publishing the
    /// description: per column, the values that do not read as the declared
    /// type, fall outside the bounds or the domain, or are cut, with the
    /// first row of each. For the curator: it reads the data exactly, prints
    /// counts and row numbers (never values) and charges nothing.
    ///
    /// Exit status: 0 when every value is as described, 3 when some are not,
    /// 2 on an error.
    Check(check::CheckArgs),
    /// Serve private queries over HTTP to analysts with keys (the curator's
    /// server), or manage its analysts: `dpkit serve analyst add|list|revoke|rekey|budget`.
    Serve(serve::ServeArgs),
    /// Write a private synthetic copy of a described table (CSV or
    /// Parquet, the description's columns and types), charged once to the
    /// analyst's ledger: its marginals are counted where the rows live and
    /// measured with noise, a graphical model is fitted to them (MST), and
    /// rows are drawn from it.
    ///
    /// Example: dpkit synth --description data/adult/adult.toml --epsilon 1
    /// --without fnlwgt,native-country --out adult-synthetic.csv
    Synth(synth::SynthArgs),
}

#[derive(Parser)]
#[command(allow_negative_numbers = true)]
struct NoiseArgs {
    /// Which noise to add (the additive mechanisms of dpkit-core's catalogue).
    #[arg(long, value_parser = additive_mechanism())]
    mechanism: MechanismKind,
    /// Privacy parameter ε (> 0): smaller is more private and noisier.
    #[arg(long)]
    epsilon: f64,
    /// How much one person can change each value (L1; L2 for gaussian).
    /// Integer mechanisms need a whole number ≥ 1.
    #[arg(long)]
    sensitivity: f64,
    /// δ for the gaussian mechanisms.
    #[arg(long)]
    delta: Option<f64>,
    /// γ ∈ [0, 1] for the staircase (default: the L1-optimal γ).
    #[arg(long)]
    gamma: Option<f64>,
    /// Confidence level of the printed error bars.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// Read this CSV file instead of standard input (first row: header).
    #[arg(long)]
    input: Option<std::path::PathBuf>,
    /// Take the values from this CSV column (needs a header row).
    #[arg(long)]
    column: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// The additive mechanisms of the catalogue, each with when to pick it.
fn additive_mechanism() -> impl clap::builder::TypedValueParser<Value = MechanismKind> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let additive = MechanismKind::ALL
        .into_iter()
        .filter(|m| matches!(m.input(), Input::Real | Input::Integer));
    PossibleValuesParser::new(additive.map(|m| PossibleValue::new(m.name()).help(m.summary())))
        .map(|name| MechanismKind::from_name(&name).unwrap_or(MechanismKind::Laplace))
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum Format {
    /// `released ± half-width`
    Text,
    /// `released,half_width` with a header row
    Csv,
}

fn integer_sensitivity(sensitivity: f64) -> Result<u64> {
    if sensitivity >= 1.0 && sensitivity.fract() == 0.0 && sensitivity <= 1e15 {
        Ok(sensitivity as u64)
    } else {
        bail!("this mechanism needs a whole-number --sensitivity ≥ 1, got {sensitivity}")
    }
}

/// The mechanism from the catalogue, and the half-width of its error bars.
fn build(args: &NoiseArgs) -> Result<(AdditiveNoise, f64)> {
    let kind = args.mechanism;
    let (eps, sens) = (args.epsilon, args.sensitivity);
    if kind.input() == Input::Integer {
        integer_sensitivity(sens)?;
    }
    let delta = if kind.needs_delta() {
        args.delta.context("the gaussian mechanisms need --delta")?
    } else {
        0.0
    };
    let noise = match (kind, args.gamma) {
        (MechanismKind::Staircase | MechanismKind::StaircaseL2, Some(gamma)) => {
            AdditiveNoise::Staircase(Staircase::with_gamma(
                eps,
                sens,
                StaircaseGamma::Value(gamma),
            )?)
        }
        _ => AdditiveNoise::build(kind, eps, delta, sens)?,
    };
    let half_width = noise
        .accuracy()
        .confidence_half_width(1.0 - args.confidence)?;
    Ok((noise, half_width))
}

/// Six significant digits, rounded up so the error bar never shrinks.
fn significant(value: f64) -> String {
    if value == 0.0 {
        return "0".into();
    }
    let decimals = (5 - value.abs().log10().floor() as i32).max(0);
    let scale = 10f64.powi(decimals);
    format!("{:.*}", decimals as usize, (value * scale).ceil() / scale)
}

/// The raw text of each value with its 1-based line number; never echoed in errors.
fn read_values(args: &NoiseArgs) -> Result<Vec<(usize, String)>> {
    let reader: Box<dyn BufRead> = match &args.input {
        Some(path) => Box::new(io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        )),
        None => Box::new(io::stdin().lock()),
    };
    let mut lines = reader.lines().enumerate();
    let column = match &args.column {
        None if args.input.is_some() => {
            bail!("--input needs --column to say which CSV column to release")
        }
        None => None,
        Some(name) => {
            let (_, header) = lines
                .next()
                .context("the input is empty: expected a CSV header row")?;
            let header = header.context("cannot read the header row")?;
            let index = header
                .split(',')
                .position(|field| field.trim() == name)
                .with_context(|| format!("no column named '{name}' in the header"))?;
            Some(index)
        }
    };
    let mut values = Vec::new();
    for (index, line) in lines {
        let line = line.with_context(|| format!("cannot read line {}", index + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let field = match column {
            None => line.trim().to_string(),
            Some(c) => line
                .split(',')
                .nth(c)
                .with_context(|| format!("line {} has too few fields", index + 1))?
                .trim()
                .to_string(),
        };
        values.push((index + 1, field));
    }
    Ok(values)
}

fn noise(args: &NoiseArgs) -> Result<()> {
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        bail!(
            "--confidence must lie strictly between 0 and 1, got {}",
            args.confidence
        );
    }
    let (mechanism, half_width) = build(args)?;
    let values = read_values(args)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if args.format == Format::Csv {
        writeln!(out, "released,half_width")?;
    }
    // Parse everything first: a bad line stops the run before any release.
    let released: Vec<String> = if mechanism.is_integer() {
        let parsed = values
            .iter()
            .map(|(line, text)| {
                text.parse::<i64>().map_err(|_| {
                    anyhow::anyhow!(
                        "line {line}: not an integer (this mechanism releases integers)"
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        with_thread_secure_rng(|rng| {
            parsed
                .into_iter()
                .map(|v| mechanism.release_integer(v, rng).map(|r| r.to_string()))
                .collect::<dpkit_core::Result<Vec<_>>>()
        })??
    } else {
        let parsed = values
            .iter()
            .map(|(line, text)| {
                text.parse::<f64>()
                    .map_err(|_| anyhow::anyhow!("line {line}: not a number"))
            })
            .collect::<Result<Vec<_>>>()?;
        with_thread_secure_rng(|rng| {
            parsed
                .into_iter()
                .map(|v| mechanism.release(v, rng).map(|r| format!("{r}")))
                .collect::<dpkit_core::Result<Vec<_>>>()
        })??
    };
    let released = released.into_iter().map(|value| (value, half_width));
    for (value, half_width) in released {
        let half_width = significant(half_width);
        match args.format {
            Format::Text => writeln!(out, "{value} ± {half_width}")?,
            Format::Csv => writeln!(out, "{value},{half_width}")?,
        }
    }
    match out.flush() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// JSON as `--format json` prints it: indented for a person when standard
/// output is a terminal, one line for a script reading a pipe or a file.
pub(crate) fn json_text(value: &serde_json::Value) -> String {
    let text = if io::stdout().is_terminal() {
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    } else {
        value.to_string()
    };
    format!("{text}\n")
}

/// Writes `text` to standard output and flushes it. A closed pipe (`dpkit
/// query … | head -c 1`) comes back as an error that `main` turns into a
/// quiet exit, where `print!` would panic.
pub(crate) fn write_stdout(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

/// Whether `error` comes from writing to a pipe whose reader has gone: the
/// reader took what it wanted, so it is no failure.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io_error| io_error.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Runs the `dpkit` command line on `args` (the first one is the program's
/// name) and returns its exit status: 0 on success, 2 on an error (one line
/// on standard error, `dpkit: error: …`), 3 when an audit finds a violation.
/// `--help` and `--version` print and return 0, a malformed command line
/// prints clap's usage error and returns 2; nothing here ends the process,
/// so the Python wheel can call it.
///
/// ```
/// let status = dpkit_cli::run(["dpkit", "budget", "--description", "no-such.toml"]);
/// assert_eq!(status, 2);
/// ```
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(usage) => {
            let _ = usage.print();
            return u8::try_from(usage.exit_code()).unwrap_or(2);
        }
    };
    let result = match &cli.command {
        Command::Noise(args) => noise(args).map(|()| false),
        Command::Audit(args) => audit::run(args),
        Command::Lab(args) => lab::lab(args).map(|()| false),
        Command::Query(args) => query::query(args).map(|()| false),
        Command::Budget(args) => query::budget(args).map(|()| false),
        Command::Describe(args) => query::describe(args).map(|()| false),
        Command::Check(args) => check::run(args),
        Command::Serve(args) => serve::serve(args).map(|()| false),
        Command::Synth(args) => synth::synth(args).map(|()| false),
    };
    match result {
        Ok(false) => 0,
        Ok(true) => audit::VIOLATION_EXIT_CODE,
        Err(error) if is_broken_pipe(&error) => 0,
        Err(error) => {
            // Not eprintln!: it panics when standard error is closed too.
            let _ = writeln!(io::stderr().lock(), "dpkit: error: {error:#}");
            2
        }
    }
}
