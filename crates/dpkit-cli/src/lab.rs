//! `dpkit lab`: the experiments that compare the mechanisms, with figures.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use dpkit_lab::{Experiment, LabSettings, run};

#[derive(Parser)]
pub struct LabArgs {
    /// The experiment to run, or `all`.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(
        Experiment::ALL.map(Experiment::name).into_iter().chain(["all"])
    ))]
    experiment: String,
    /// The output folder (figures as PNG and SVG, CSV files, report.md).
    #[arg(long, default_value = "lab-output")]
    out: PathBuf,
    /// The folder with the Adult files (adult.data.csv, adult.test.csv).
    #[arg(long, default_value = "data/adult")]
    data: PathBuf,
    /// Seed for a reproducible run (default: a fresh OS seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Few samples and repeats: a smoke test in seconds, not a measurement.
    #[arg(long)]
    quick: bool,
}

/// Runs the chosen experiments and prints where the report is.
pub fn lab(args: &LabArgs) -> Result<()> {
    let experiments: Vec<Experiment> = if args.experiment == "all" {
        Experiment::ALL.to_vec()
    } else {
        vec![Experiment::from_name(&args.experiment).context("unknown experiment")?]
    };
    let settings = LabSettings {
        output: args.out.clone(),
        data: args.data.clone(),
        seed: args.seed,
        quick: args.quick,
    };
    let sections = run(&experiments, &settings)?;
    for section in &sections {
        let files: Vec<&str> = section
            .figures
            .iter()
            .map(|(png, _)| png.as_str())
            .chain(section.csv_files.iter().map(String::as_str))
            .collect();
        crate::write_stdout(&format!("{:<48} {}\n", section.title, files.join(" ")))?;
    }
    crate::write_stdout(&format!(
        "report: {}\n",
        args.out.join("report.md").display()
    ))?;
    Ok(())
}
