#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-lab
//!
//! The experiments that compare dpkit's mechanisms, on speed and on accuracy,
//! on real data (the bundled UCI Adult census) and on the reference's models.
//! Every experiment writes its figures (PNG and SVG), the numbers behind each
//! figure (CSV) and a section of `report.md` into one output folder.
//!
//! ```no_run
//! use dpkit_lab::{Experiment, LabSettings, run};
//! let settings = LabSettings {
//!     output: "lab-output".into(),
//!     data: "data/adult".into(),
//!     seed: Some(1),
//!     quick: true,
//! };
//! let sections = run(&[Experiment::Densities], &settings).unwrap();
//! assert_eq!(sections.len(), 1);
//! ```

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

pub mod adult;
pub mod error;
pub mod experiments;
pub mod machine;
pub mod output;
pub mod rng;

pub use error::{LabError, Result};
pub use output::{OutputDir, Section};
use rng::ExperimentRng;

/// Where and how the experiments run.
#[derive(Debug, Clone, PartialEq)]
pub struct LabSettings {
    /// The output folder.
    pub output: PathBuf,
    /// The folder holding the Adult files.
    pub data: PathBuf,
    /// A seed for a reproducible run; `None` draws a fresh OS seed.
    pub seed: Option<u64>,
    /// Fewer samples, repeats and ε values: seconds instead of minutes.
    pub quick: bool,
}

impl LabSettings {
    /// `full` in a normal run, `quick` in quick mode.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// One experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// Nanoseconds per noise value, every mechanism, next to a naive f64 Laplace.
    Speed,
    /// E|X| and variance against ε, measured and closed-form.
    Accuracy,
    /// A 50-bin histogram of Adult ages released at many ε.
    Histogram,
    /// Local Laplace on heights with sampled sensitivities.
    MeanHeight,
    /// The exponential mechanism choosing the most common marital status.
    Exponential,
    /// Two releases and their average against one release of the summed ε.
    Composition,
    /// The densities of the staircase, Laplace and Gaussian noises.
    Densities,
}

impl Experiment {
    /// Every experiment, in report order.
    pub const ALL: [Experiment; 7] = [
        Self::Speed,
        Self::Accuracy,
        Self::Histogram,
        Self::MeanHeight,
        Self::Exponential,
        Self::Composition,
        Self::Densities,
    ];

    /// The command-line name.
    ///
    /// ```
    /// use dpkit_lab::Experiment;
    /// assert!(Experiment::ALL.iter().all(|e| Experiment::from_name(e.name()) == Some(*e)));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::Speed => "speed",
            Self::Accuracy => "accuracy",
            Self::Histogram => "histogram",
            Self::MeanHeight => "mean-height",
            Self::Exponential => "exponential",
            Self::Composition => "composition",
            Self::Densities => "densities",
        }
    }

    /// Whether the experiment reads the Adult files.
    ///
    /// ```
    /// use dpkit_lab::Experiment;
    /// assert!(Experiment::Composition.reads_adult() && !Experiment::Speed.reads_adult());
    /// ```
    pub fn reads_adult(self) -> bool {
        matches!(
            self,
            Self::Histogram | Self::Exponential | Self::Composition
        )
    }

    /// The experiment called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// What an experiment needs while it runs.
pub struct Context<'a> {
    /// The settings.
    pub settings: &'a LabSettings,
    /// Where to write.
    pub out: &'a OutputDir,
    /// This experiment's random source.
    pub rng: ExperimentRng,
}

impl Context<'_> {
    /// A progress bar over `total` steps on standard error (hidden when
    /// standard error is not a terminal).
    pub fn progress(&self, total: u64, what: &str) -> ProgressBar {
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template("{prefix:>12} [{bar:32}] {pos}/{len} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(what.to_string());
        bar
    }
}

/// Runs `experiments` in order and writes `report.md` with their sections.
///
/// The Adult files are looked for before anything runs, so that a missing
/// data folder stops the lab at once, not halfway.
pub fn run(experiments: &[Experiment], settings: &LabSettings) -> Result<Vec<Section>> {
    let missing = adult::ADULT_FILES
        .iter()
        .any(|f| !settings.data.join(f).is_file());
    if missing && experiments.iter().any(|e| e.reads_adult()) {
        return Err(LabError::NoData {
            folder: settings.data.clone(),
        });
    }
    let out = OutputDir::create(&settings.output)?;
    let mut sections = Vec::with_capacity(experiments.len());
    for (stream, &experiment) in experiments.iter().enumerate() {
        let mut context = Context {
            settings,
            out: &out,
            rng: ExperimentRng::new(settings.seed, stream as u64)?,
        };
        let mut section = match experiment {
            Experiment::Speed => experiments::speed::run(&mut context)?,
            Experiment::Accuracy => experiments::accuracy::run(&mut context)?,
            Experiment::Histogram => experiments::histogram::run(&mut context)?,
            Experiment::MeanHeight => experiments::mean_height::run(&mut context)?,
            Experiment::Exponential => experiments::exponential::run(&mut context)?,
            Experiment::Composition => experiments::composition::run(&mut context)?,
            Experiment::Densities => experiments::densities::run(&mut context)?,
        };
        section.title = format!("{}. {}", stream + 1, section.title);
        sections.push(section);
    }
    out.write("report.md", &report(&sections, settings))?;
    Ok(sections)
}

fn report(sections: &[Section], settings: &LabSettings) -> String {
    let seed = match settings.seed {
        Some(seed) => format!("seed {seed} (reproducible)"),
        None => "a fresh OS seed".to_string(),
    };
    let mode = if settings.quick {
        "quick mode (few samples: a smoke test, not a measurement)"
    } else {
        "full mode"
    };
    let mut text = format!(
        "# dpkit lab report\n\nWritten by `dpkit lab` in {mode}, with {seed}, on {} on {}. \
         Timings compare only within one run. Every figure is also in SVG next to its PNG, \
         and every number in the CSV files.\n\n",
        machine::cpu(),
        machine::today()
    );
    for section in sections {
        text.push_str(&section.to_markdown());
    }
    text
}
