//! `dpkit query`, `dpkit budget` and `dpkit describe`: private SQL with a
//! budget that persists.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use dpkit_core::rng::SecureRng;
use dpkit_ledger::{BudgetState, default_path, shown_epsilon};
use dpkit_query::alternative::{GaussianAlternative, Targeted};
use dpkit_query::draft::draft_from_csv;
use dpkit_query::{
    Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings, ReleasedTable,
};
use dpkit_release::TargetError;

use crate::write_stdout;

/// Where the ledger and which dataset.
#[derive(Parser)]
pub struct LedgerArgs {
    /// The data description (TOML) of the dataset.
    #[arg(long, value_name = "FILE")]
    pub(crate) description: PathBuf,
    /// Whose budget to charge; each analyst has a ledger per dataset.
    #[arg(long, default_value = "default")]
    analyst: String,
    /// The ledger file (default: <table>.<analyst>.ledger.sqlite beside the description).
    #[arg(long, value_name = "FILE")]
    ledger: Option<PathBuf>,
}

#[derive(Parser)]
#[command(allow_negative_numbers = true)]
pub struct QueryArgs {
    #[command(flatten)]
    ledger: LedgerArgs,
    /// ε this query may spend (shared by its aggregates; an average splits
    /// its share between its sum and count to make its error least).
    #[arg(long, required_unless_present = "target_error")]
    epsilon: Option<f64>,
    /// Accuracy first: find the smallest ε at which every aggregate's
    /// interval is ±H or narrower, and show it like --explain (nothing is
    /// spent unless --spend is given). With auto noise and --delta, auto
    /// takes Gaussian noise where the budget pays for more such queries.
    #[arg(long, value_name = "H", conflicts_with = "epsilon")]
    target_error: Option<f64>,
    /// With --target-error: the fewest rows a group has (averages and spreads
    /// have intervals that shrink with the group).
    #[arg(long, value_name = "N", requires = "target_error")]
    target_rows: Option<f64>,
    /// With --target-error: run the query at the ε found, and charge it.
    #[arg(long, requires = "target_error")]
    spend: bool,
    /// δ this query may spend: needed to GROUP BY a column without a public
    /// domain (keys pass a noisy threshold) and for the gaussian mechanism.
    #[arg(long, default_value_t = 0.0)]
    delta: f64,
    /// Noise for every aggregate (auto: geometric for counts, staircase for sums).
    #[arg(long, value_enum, default_value_t = Mechanism::Auto)]
    mechanism: Mechanism,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// Print the rewritten plan, each release's ε and expected error; spend nothing.
    #[arg(long)]
    explain: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = AnswerFormat::Table)]
    format: AnswerFormat,
    /// The query: SELECT … FROM table [WHERE …] [GROUP BY …] with COUNT, SUM,
    /// AVG, VAR, STDDEV, MIN, MAX, MEDIAN or PERCENTILE_CONT.
    sql: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mechanism {
    /// geometric for counts, staircase for sums: the least error
    Auto,
    /// Laplace everywhere
    Laplace,
    /// Gaussian everywhere (needs --delta)
    Gaussian,
    /// staircase everywhere (discrete for counts)
    Staircase,
    /// two-sided geometric (counts, whole-number sums)
    Geometric,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum AnswerFormat {
    /// An aligned table with ± half-widths
    Table,
    /// CSV with value, low and high columns
    Csv,
    /// One JSON object (indented on a terminal)
    Json,
}

#[derive(Parser)]
pub struct BudgetArgs {
    #[command(flatten)]
    ledger: LedgerArgs,
    /// Set the ledger's total to the description's `[budget]`, raised or
    /// lowered (what was spent stays spent). Editing the description alone
    /// changes nothing in a ledger that exists.
    #[arg(long)]
    grant: bool,
}

#[derive(Parser)]
pub struct DescribeArgs {
    /// The CSV file(s) to describe (only their headers and their first
    /// rows' value types are read). Several files about the same people
    /// give one draft: the table holding the people, their other tables as
    /// private ones and the rest as public ones, each role marked GUESSED.
    #[arg(required = true, num_args = 1..)]
    csv: Vec<PathBuf>,
    /// The table name queries will use (default: the file name; one file).
    #[arg(long, conflicts_with = "person")]
    name: Option<String>,
    /// With several files: the column that says whose row it is (default:
    /// guessed, a column named alike in two files with distinct values in one).
    #[arg(long)]
    person: Option<String>,
}

/// The analyst's ledger, created with the description's budget. With
/// `grant`, its total is set to the description's; without, a total that
/// differs (the description was edited) gets a note on standard error.
pub(crate) fn open_ledger(
    args: &LedgerArgs,
    description: &Description,
    grant: bool,
) -> Result<Ledger> {
    let path = ledger_path(args, description)?;
    let (epsilon, delta) = (description.budget_epsilon, description.budget_delta);
    let (ledger, edited) = Ledger::open_declared(&path, epsilon, delta, grant)?;
    if let Some(edited) = edited {
        note(&format!(
            "{} {edited}; `dpkit budget --grant` sets the description's",
            args.description.display()
        ));
    }
    Ok(ledger)
}

/// The ledger file: `--ledger`, or the default beside the description.
pub(crate) fn ledger_path(args: &LedgerArgs, description: &Description) -> Result<PathBuf> {
    match &args.ledger {
        Some(path) => Ok(path.clone()),
        None => {
            default_path(&args.description, &description.table, &args.analyst).context("--analyst")
        }
    }
}

/// A `dpkit: note: …` line on standard error, beside the answer. A closed
/// standard error loses the note, never the answer.
pub(crate) fn note(text: &str) {
    let line = format!("dpkit: note: {text}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

/// The budget as `dpkit budget` details it: what plain sums have left, or,
/// once they are past their share, what the concentrated accountant that
/// pays now has left; and how many queries were charged.
pub(crate) fn budget_line(state: &BudgetState) -> String {
    let charged = format!(
        "{} {} charged",
        state.queries,
        if state.queries == 1 {
            "query"
        } else {
            "queries"
        }
    );
    if let Some(c) = state.concentrated.filter(|_| state.past_plain_sums()) {
        return format!(
            "left: {} ({}); {charged}",
            c.left_text(),
            state.used_up_text()
        );
    }
    let kept = if state.plain_delta < state.total_delta {
        "the other half of δ backs the concentrated accountant; "
    } else {
        ""
    };
    format!(
        "remaining ε = {} of {}, δ = {} of {} ({kept}{charged})",
        shown_epsilon(state.remaining_epsilon()),
        shown_epsilon(state.total_epsilon),
        small(state.remaining_delta()),
        small(state.total_delta),
    )
}

/// The budget under an answer (issue 67): what this release cost, and
/// what is left as the accountant that pays for more like it sees it, with
/// how many more (`left`, from [`Ledger::left_after`]; plain sums' ε when
/// that could not be counted). `dpkit budget` and `--explain` give details.
pub(crate) fn answer_budget_line(cost: &str, state: &BudgetState, left: Option<String>) -> String {
    let left = left.unwrap_or_else(|| format!("ε = {}", state.plain_left_text()));
    format!("{cost} · left: {left}")
}

/// δ-sized numbers: 0, or in exponent notation.
fn small(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else {
        format!("{:e}", (value * 1e15).round() / 1e15)
    }
}

/// Answers one private query and prints it.
pub fn query(args: &QueryArgs) -> Result<()> {
    let description = Description::load(&args.ledger.description)?;
    let mut settings = ReleaseSettings {
        epsilon: args.epsilon.unwrap_or(1.0),
        delta: args.delta,
        mechanism: match args.mechanism {
            Mechanism::Auto => MechanismChoice::Auto,
            Mechanism::Laplace => MechanismChoice::Laplace,
            Mechanism::Gaussian => MechanismChoice::Gaussian,
            Mechanism::Staircase => MechanismChoice::Staircase,
            Mechanism::Geometric => MechanismChoice::Geometric,
        },
        confidence: args.confidence,
    };
    let ledger = open_ledger(&args.ledger, &description, false)?;
    let engine = QueryEngine::open(description)?;
    if let Some(half_width) = args.target_error {
        let target = TargetError {
            half_width,
            rows: args.target_rows,
        };
        let targeted = engine.explain_target(&args.sql, &settings, target, &ledger)?;
        if !args.spend {
            return write_stdout(&target_text(&targeted, half_width, args.confidence));
        }
        settings = targeted.settings;
    }
    if args.explain {
        let explained = engine.explain_against(&args.sql, &settings, &ledger)?;
        let more = explained.queries_left;
        return write_stdout(&format!(
            "{}The budget can pay for {more} more {} like this one.\n{}",
            explained.explanation,
            if more == 1 { "query" } else { "queries" },
            explained
                .gaussian
                .map(|g| alternative_text(&g))
                .unwrap_or_default()
        ));
    }
    let mut rng = SecureRng::from_os()?;
    let deadlines = dpkit_query::timing::Deadlines::default();
    // The same query again (in any --format) is the kept answer, free.
    let request = request_text(args, &engine, &settings)?;
    let once = engine.answer_once_by_deadline(
        &args.sql,
        &settings,
        (&ledger, &request),
        &deadlines,
        &mut rng,
    )?;
    let mut answer = once.table;
    if once.replay {
        answer
            .notes
            .push("the same query as before, replayed from the ledger: nothing was spent".into());
    }
    let state = ledger.state()?;
    // What is left for more like it, at the cost the run planned; a replay
    // was not planned, so it is planned here (from the description alone).
    // Plain ε if that fails.
    let cost = once.cost.or_else(|| {
        let planned = engine.explain_with_cost(&args.sql, &settings).ok();
        planned.map(|(_, cost)| cost)
    });
    let left = cost.and_then(|cost| ledger.left_after(cost).ok());
    if args.format == AnswerFormat::Csv {
        // CSV is for scripts: the notes go beside it, on standard error.
        answer.notes.iter().for_each(|text| note(text));
    }
    write_stdout(&answer_text(
        args.format,
        &answer,
        &state,
        once.replay,
        left,
    )?)
}

/// The request as the ledger keeps its answer: the query, its settings
/// and the dataset (the description's text and the data files' sizes and
/// times), as the service keeps one; the output format is not part of it.
fn request_text(
    args: &QueryArgs,
    engine: &QueryEngine,
    settings: &ReleaseSettings,
) -> Result<String> {
    let description = engine.description();
    let files = description.data_files();
    let fingerprint = dpkit_serve::datasets::fingerprint(&args.ledger.description, &files)?;
    Ok(dpkit_query::engine::request_text(
        "cli-v1",
        &description.table,
        &fingerprint,
        &args.sql,
        settings,
    ))
}

/// What `--target-error` without `--spend` prints: the ε found, the noise
/// `auto` chose and why, the explanation, and how many more such queries
/// the budget can pay for.
fn target_text(targeted: &Targeted, half_width: f64, confidence: f64) -> String {
    let chosen = &targeted.settings;
    let choice = match targeted.passed_over {
        Some((epsilon, left)) => format!(
            " with Gaussian noise at δ = {delta:e}: auto chose it because the budget can pay for \
             {} more queries like this with it, and {left} with auto's own noise, which needs \
             ε = {epsilon} (to pin the choice: --mechanism gaussian --epsilon {} --delta {delta:e})",
            targeted.queries_left,
            chosen.epsilon,
            delta = chosen.delta,
        ),
        None => String::new(),
    };
    let more = targeted.queries_left;
    format!(
        "ε = {} is the smallest ε at which every {}% interval is ±{half_width} or narrower{choice} \
         (nothing spent: add --spend to run the query at it)\n\n{}The budget can pay for {more} \
         more {} like this one.\n",
        chosen.epsilon,
        confidence * 100.0,
        targeted.explanation,
        if more == 1 { "query" } else { "queries" },
    )
}

/// What `--explain` says of a better Gaussian alternative.
fn alternative_text(gaussian: &GaussianAlternative) -> String {
    let errors: Vec<String> = gaussian
        .errors
        .iter()
        .map(|(label, with, without)| {
            format!(
                "{} instead of {} for the {label}",
                rounded(*with),
                rounded(*without)
            )
        })
        .collect();
    format!(
        "Gaussian noise would pay for as many ({}) with less error: E|error| {} \
         (--mechanism gaussian --epsilon {} --delta {}).\n",
        gaussian.queries,
        errors.join(", "),
        gaussian.epsilon,
        gaussian.delta
    )
}

/// Four significant digits, for the text.
fn rounded(x: f64) -> String {
    format!("{}", format!("{x:.3e}").parse::<f64>().unwrap_or(x))
}

/// The answer in the chosen format, with what is left of the budget.
fn answer_text(
    format: AnswerFormat,
    answer: &ReleasedTable,
    state: &BudgetState,
    replay: bool,
    left: Option<String>,
) -> Result<String> {
    Ok(match format {
        AnswerFormat::Table => {
            let cost = if replay {
                "replayed, nothing spent".to_string()
            } else {
                format!(
                    "this query cost ε = {}, δ = {}",
                    answer.epsilon,
                    small(answer.delta)
                )
            };
            let mut text = format!(
                "{}\n{}% intervals · {}\n",
                answer.to_text(),
                answer.confidence * 100.0,
                answer_budget_line(&cost, state, left)
            );
            for line in &answer.notes {
                text.push_str(&format!("note: {line}\n"));
            }
            text
        }
        AnswerFormat::Csv => answer.to_csv(),
        AnswerFormat::Json => {
            let mut json = serde_json::to_value(answer).context("cannot encode the answer")?;
            json["remaining_epsilon"] = serde_json::json!(shown_epsilon(state.remaining_epsilon()));
            json["remaining_delta"] = serde_json::json!(state.remaining_delta());
            json["replay"] = serde_json::json!(replay);
            if let Some(c) = state.concentrated {
                json["concentrated"] = serde_json::json!(c);
            }
            crate::json_text(&json)
        }
    })
}

/// Prints an analyst's budget.
pub fn budget(args: &BudgetArgs) -> Result<()> {
    let description = Description::load(&args.ledger.description)?;
    let ledger = open_ledger(&args.ledger, &description, args.grant)?;
    let state = ledger.state()?;
    let concentrated = match state.concentrated {
        // Each accountant counts every query, also those the other paid
        // for, so either may have counted more than its total.
        Some(c) => format!(
            "{} / {}: by the concentrated accountant (zCDP, half of δ): {}{}\n",
            description.table,
            args.ledger.analyst,
            c.text(),
            if c.spent_rho > c.total_rho {
                " (it counts every query, and is past its total: plain sums pay)"
            } else {
                ""
            }
        ),
        None => String::new(),
    };
    write_stdout(&format!(
        "{} / {}: spent ε = {}, δ = {}; {}\n{concentrated}",
        description.table,
        args.ledger.analyst,
        shown_epsilon(state.spent_epsilon),
        small(state.spent_delta),
        budget_line(&state)
    ))
}

/// Prints a draft description of one CSV file, or of several about the
/// same people.
pub fn describe(args: &DescribeArgs) -> Result<()> {
    if let [csv] = args.csv.as_slice()
        && args.person.is_none()
    {
        let name = args
            .name
            .clone()
            .unwrap_or_else(|| dpkit_query::draft::table_name(csv));
        return write_stdout(&draft_from_csv(csv, &name)?);
    }
    let paths: Vec<&std::path::Path> = args.csv.iter().map(PathBuf::as_path).collect();
    write_stdout(&dpkit_query::draft::draft_from_csvs(
        &paths,
        args.person.as_deref(),
    )?)
}
