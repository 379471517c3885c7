//! `dpkit synth`: a private synthetic copy of a described table, charged
//! once to the analyst's ledger.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use dpkit_core::rng::SecureRng;
use dpkit_query::synth::{self, Columns, MethodName};
use dpkit_query::{Description, QueryEngine};

use crate::query::{LedgerArgs, budget_line, open_ledger};
use crate::write_stdout;

#[derive(Clone, Copy, ValueEnum)]
enum Method {
    /// noisy 1-way marginals and a spanning tree of noisy 2-way ones,
    /// chosen privately: seconds
    Mst,
    /// noisy 1-way marginals, then rounds that each measure the marginal
    /// the model gets most wrong: minutes, and less error on 3-way marginals
    Aim,
}

#[derive(Parser)]
#[command(allow_negative_numbers = true)]
pub struct SynthArgs {
    #[command(flatten)]
    ledger: LedgerArgs,
    /// ε of the whole synthetic table, charged once.
    #[arg(long)]
    epsilon: f64,
    /// δ of the whole synthetic table (its marginals carry Gaussian noise).
    #[arg(long, default_value_t = 1e-9)]
    delta: f64,
    /// The synthesizer.
    #[arg(long, value_enum, default_value_t = Method::Mst)]
    method: Method,
    /// Rows to write (default: as many as the noisy model estimates).
    #[arg(long, value_name = "N")]
    rows: Option<usize>,
    /// Where to write the table: `.parquet` for Parquet, else CSV.
    #[arg(long, value_name = "FILE", required_unless_present = "explain")]
    out: Option<PathBuf>,
    /// The table (default: the description's own; or one of its private tables).
    #[arg(long)]
    table: Option<String>,
    /// Only these columns (comma-separated; default: every described one).
    #[arg(long, value_delimiter = ',', value_name = "COLUMNS")]
    columns: Vec<String>,
    /// Leave these columns out (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "COLUMNS")]
    without: Vec<String>,
    /// The most bins an integer column is cut into, from its public bounds.
    #[arg(long, default_value_t = synth::DEFAULT_BINS)]
    bins: u32,
    /// Print the columns' codes, the noise on each marginal and the cost;
    /// spend nothing.
    #[arg(long)]
    explain: bool,
    /// For the curator who holds the data: also compare the synthetic
    /// table's 1-, 2- and 3-way marginals with the true ones, exactly. The
    /// comparison is not private: never pass it on.
    #[arg(long)]
    report_true: bool,
}

/// Plans, charges, synthesizes and writes the table, then reports.
pub fn synth(args: &SynthArgs) -> Result<()> {
    let description = Description::load(&args.ledger.description)?;
    let ledger = open_ledger(&args.ledger, &description, false)?;
    let engine = QueryEngine::open(description)?;
    let columns = Columns {
        table: args.table.clone(),
        only: args.columns.clone(),
        without: args.without.clone(),
        bins: Some(args.bins),
    };
    let method = match args.method {
        Method::Mst => MethodName::Mst,
        Method::Aim => MethodName::Aim,
    };
    let planned = synth::plan(&engine, &columns, method, (args.epsilon, args.delta))?;
    if args.explain {
        let more = ledger.how_many_more(planned.cost)?;
        return write_stdout(&format!(
            "{}The budget can pay for {more} more {} like this one.\n",
            planned.explain()?,
            if more == 1 { "table" } else { "tables" }
        ));
    }
    let out = args.out.as_ref().context("--out names the file to write")?;
    let mut rng = SecureRng::from_os()?;
    let synthesized = planned.run(&engine, &ledger, args.rows, &mut rng)?;
    synth::output::write(&synthesized.rows, out)?;
    let chosen: Vec<String> = synthesized.chosen.iter().map(|set| set.join("–")).collect();
    let fit = synthesized.one_way;
    let mut text = format!(
        "wrote {} synthetic rows of {} columns to {}\n{} measured every column, then {}\n\
         1-way marginals against their noisy measurements: mean total-variation distance \
         {:.4}, max {:.4}\n",
        synthesized.rows.num_rows(),
        synthesized.rows.num_columns(),
        out.display(),
        planned.method_name(),
        if chosen.is_empty() {
            "nothing more".into()
        } else {
            chosen.join(", ")
        },
        fit.mean,
        fit.max
    );
    if args.report_true {
        for way in 1..=3 {
            let fit = synth::true_fit(&engine, &planned, &synthesized, way)?;
            if fit.marginals > 0 {
                text.push_str(&format!(
                    "against the true data (not private), all {} {way}-way marginals: mean \
                     total-variation distance {:.4}, max {:.4}\n",
                    fit.marginals, fit.mean, fit.max
                ));
            }
        }
    }
    text.push_str(&format!(
        "spent {} · {}\n",
        planned.cost_text(),
        budget_line(&ledger.state()?)
    ));
    write_stdout(&text)
}
