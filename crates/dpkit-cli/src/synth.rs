//! `dpkit synth`: a private synthetic copy of a described table, charged
//! once to the analyst's ledger.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use dpkit_core::rng::SecureRng;
use dpkit_query::synth::{self, Columns, Fit, MarginalFit, MethodName};
use dpkit_query::{Description, QueryEngine};

use crate::query::{LedgerArgs, answer_budget_line, ledger_path, open_ledger};
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
    #[arg(long, default_value_t = synth::DEFAULT_BINS,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
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
    /// Draw the measured marginals furthest from their noisy measurements
    /// to STEM.png and STEM.svg (free); with --report-true, also the 1-, 2-
    /// and 3-way marginals furthest from the true ones (four of each) to
    /// STEM-true.png and STEM-true.svg (not private).
    #[arg(long, value_name = "STEM")]
    figure: Option<PathBuf>,
}

/// The most marginals a figure shows.
const FIGURE_MARGINALS: usize = 12;

/// Plans, charges, synthesizes and writes the table, then reports.
pub fn synth(args: &SynthArgs) -> Result<()> {
    let description = Description::load(&args.ledger.description)?;
    if let Some(out) = &args.out {
        not_an_input(out, &args.ledger, &description)?;
    }
    if let Some(stem) = &args.figure {
        writable(stem)?;
    }
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
    // Made before the charge: a path that cannot be written costs nothing.
    let output = synth::output::Output::create(out)?;
    let mut rng = SecureRng::from_os()?;
    let synthesized = match planned.run(&engine, &ledger, args.rows, &mut rng) {
        Ok(synthesized) => synthesized,
        Err(error) => {
            output.discard();
            return Err(error.into());
        }
    };
    output.write(&synthesized.rows)?;
    let chosen: Vec<String> = synthesized.chosen.iter().map(|set| set.join("–")).collect();
    write_stdout(&format!(
        "wrote {} synthetic rows of {} columns to {}\n{} measured every column, then {}\n\
         {}{}\n",
        synthesized.rows.num_rows(),
        synthesized.rows.num_columns(),
        out.display(),
        planned.method_name(),
        if chosen.is_empty() {
            "nothing more".into()
        } else {
            chosen.join(", ")
        },
        measured_lines(&synthesized.measured),
        answer_budget_line(
            &format!("this release cost {}", planned.cost_text()),
            &ledger.state()?,
            ledger.left_after(planned.cost).ok()
        )
    ))?;
    if let Some(stem) = &args.figure {
        let title = "The measured marginals furthest from their noisy measurements";
        drawn(
            stem,
            title,
            "synthetic against noisy",
            &synthesized.measured,
        )?;
    }
    if args.report_true {
        let mut each = Vec::new();
        for way in 1..=3 {
            // Not private, and charged nothing: a comparison that cannot
            // be counted (too many cells, say) is a note, not a failure.
            let line = match synth::true_marginals(&engine, &planned, &synthesized, way) {
                Ok(fits) if fits.is_empty() => continue,
                Ok(fits) => {
                    let fit = Fit::of_way(&fits, way);
                    each.extend(fits);
                    format!(
                        "against the true data (not private), all {} {way}-way marginals: mean \
                         total-variation distance {:.4}, max {:.4}\n",
                        fit.marginals, fit.mean, fit.max
                    )
                }
                Err(why) => format!("the {way}-way marginals were not compared: {why}\n"),
            };
            write_stdout(&line)?;
        }
        if let (Some(stem), false) = (&args.figure, each.is_empty()) {
            let mut name = stem.file_name().unwrap_or_default().to_os_string();
            name.push("-true");
            // The worst of each size, not twelve 3-way marginals alone.
            let worst: Vec<MarginalFit> = (1..=3)
                .flat_map(|way| {
                    let of_way: Vec<MarginalFit> = each
                        .iter()
                        .filter(|m| m.columns.len() == way)
                        .cloned()
                        .collect();
                    MarginalFit::worst(&of_way, FIGURE_MARGINALS / 3)
                })
                .collect();
            let title = "The 1-, 2- and 3-way marginals furthest from the true data (not private)";
            drawn(
                &stem.with_file_name(name),
                title,
                "synthetic against true",
                &worst,
            )?;
        }
    }
    Ok(())
}

/// One line per size of marginal measured: their mean and largest
/// distance from their noisy measurements.
fn measured_lines(measured: &[MarginalFit]) -> String {
    let most = measured.iter().map(|m| m.columns.len()).max().unwrap_or(0);
    let mut lines = String::new();
    for way in 1..=most {
        let fit = Fit::of_way(measured, way);
        if fit.marginals > 0 {
            lines.push_str(&format!(
                "{way}-way marginals against their noisy measurements ({}): mean \
                 total-variation distance {:.4}, max {:.4}\n",
                fit.marginals, fit.mean, fit.max
            ));
        }
    }
    lines
}

/// Refuses, before the charge, a figure whose files cannot be written (a
/// folder that does not exist or that cannot be written to): it costs
/// nothing.
fn writable(stem: &Path) -> Result<()> {
    let folder = stem.parent().filter(|p| !p.as_os_str().is_empty());
    if folder.is_some_and(|folder| !folder.is_dir()) {
        bail!("--figure: the folder it names does not exist; make it first");
    }
    for path in dpkit_plot::paths(stem) {
        if path.exists() {
            continue;
        }
        std::fs::File::create(&path)
            .and_then(|_| std::fs::remove_file(&path))
            .map_err(|_| anyhow::anyhow!("--figure: {} cannot be written", path.display()))?;
    }
    Ok(())
}

/// Draws the marginals of `each` furthest from what they were compared
/// with to `stem`.png and .svg, and says where. After the release, a
/// figure that cannot be drawn (every distance 0, a disk that filled) is a
/// note, not a failure.
fn drawn(stem: &Path, title: &str, group: &str, each: &[MarginalFit]) -> Result<()> {
    let worst = MarginalFit::worst(each, FIGURE_MARGINALS);
    let figure = dpkit_plot::BarFigure {
        title: title.to_string(),
        value_label: "total-variation distance".to_string(),
        categories: worst.iter().map(|m| m.columns.join(" × ")).collect(),
        groups: vec![dpkit_plot::BarGroup {
            name: group.to_string(),
            values: worst.iter().map(|m| m.distance).collect(),
            ranges: Vec::new(),
        }],
    };
    match dpkit_plot::draw(&figure, stem) {
        Ok([png, svg]) => write_stdout(&format!("drew {} and {}\n", png.display(), svg.display())),
        Err(why) => write_stdout(&format!(
            "the figure {} was not drawn: {why}\n",
            stem.display()
        )),
    }
}

/// Refuses an `--out` that is the ledger, the description or a data file:
/// writing there would destroy it.
fn not_an_input(out: &Path, ledger: &LedgerArgs, description: &Description) -> Result<()> {
    let Ok(out) = out.canonicalize() else {
        return Ok(());
    };
    let mut inputs = vec![
        ledger_path(ledger, description)?,
        ledger.description.clone(),
    ];
    inputs.push(description.file.clone());
    inputs.extend(description.private.values().map(|t| t.file.clone()));
    inputs.extend(description.public.values().map(|t| t.file.clone()));
    if inputs
        .iter()
        .any(|p| p.canonicalize().is_ok_and(|p| p == out))
    {
        bail!("--out names the ledger, the description or a data file: choose another file");
    }
    Ok(())
}
