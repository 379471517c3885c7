//! Private synthetic tables (`dpkit synth`): a description's table coded
//! over public domains ([`coding`]), its marginals counted by the private
//! plan where the rows live ([`marginals`]), MST or AIM from `dpkit-synth`
//! run on them under one charge to the ledger, and the rows it samples
//! written with the description's types ([`output`]).
//!
//! The privacy argument is the mechanism's (`dpkit_synth::Mst` and
//! `dpkit_synth::Aim`, their `# Privacy` sections, and their `within`, which
//! fix the whole loss before any row is read), for marginals
//! that one person moves by at most the L1 sensitivity the plan of a count
//! gives ([`EngineMarginals::sensitivity`]). Everything before the charge
//! reads the description alone; everything after the model is
//! post-processing of noisy counts.

pub mod coding;
pub mod marginals;
pub mod output;
pub mod quality;

use datafusion::arrow::record_batch::RecordBatch;
use dpkit_core::accounting::Cost;
use dpkit_ledger::Ledger;
use dpkit_synth::{Aim, Domain, Mst, Release, Sampling, Synthesizer};
use rand_core::CryptoRng;

pub use coding::{CodedTable, Coding, Columns, DEFAULT_BINS};
pub use marginals::{EngineMarginals, Plans};
pub use quality::{Fit, MarginalFit, true_marginals};
use quality::{Noisy, subsets};

use crate::QueryEngine;
use crate::error::{QueryError, Result};

/// The most rows a synthetic table may have.
pub const MAX_ROWS: usize = 100_000_000;
/// The most values (rows × columns) a synthetic table may have: about
/// 1.5 GB while it is drawn and written.
pub const MAX_VALUES: usize = 100_000_000;

/// A synthetic table planned from public facts alone: its columns, the
/// mechanism and what it will cost. Nothing is read or spent yet.
pub struct Planned {
    /// The table's columns and their codes.
    pub table: CodedTable,
    /// The codes' public domain.
    pub domain: Domain,
    /// How far one person moves any marginal (L1).
    pub sensitivity: f64,
    /// The plans of every marginal MST may count.
    pub plans: Plans,
    /// The mechanism.
    pub method: Method,
    /// What the ledger is charged.
    pub cost: Cost,
}

/// Which synthesizer, with its parameters.
#[derive(Debug, Clone)]
pub enum Method {
    /// MST: the 1-way marginals and a spanning tree of 2-way ones.
    Mst(Mst),
    /// AIM: the 1-way marginals, then rounds that each measure the 1- or
    /// 2-way marginal the model gets most wrong.
    Aim(Aim),
}

/// The synthesizers `dpkit synth --method` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MethodName {
    /// MST (the default: seconds).
    #[default]
    Mst,
    /// AIM (minutes on Adult; lower error on 3-way marginals).
    Aim,
}

impl MethodName {
    /// The method `mst` or `aim` names, if either.
    ///
    /// ```
    /// use dpkit_query::synth::MethodName;
    /// assert_eq!(MethodName::from_name("aim"), Some(MethodName::Aim));
    /// assert_eq!(MethodName::from_name("gan"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "mst" => Some(Self::Mst),
            "aim" => Some(Self::Aim),
            _ => None,
        }
    }
}

/// A synthetic table and what it released on the way.
pub struct Synthesized {
    /// The rows, with the description's column types.
    pub rows: RecordBatch,
    /// The same rows as codes.
    pub codes: dpkit_synth::Table,
    /// The marginals measured after the 1-way ones, by column names, in
    /// the order chosen (AIM may measure one more than once).
    pub chosen: Vec<Vec<String>>,
    /// The synthetic 1-way marginals against the noisy ones (free).
    pub one_way: Fit,
    /// Each marginal measured (every column's, then the chosen ones)
    /// against its first noisy measurement (free).
    pub measured: Vec<MarginalFit>,
}

/// Plans a synthetic copy of the table `columns` chooses, at (ε, δ) as one
/// release: the columns' codes, the marginals' sensitivity from the
/// private plan, MST at the largest ρ that fits. Reads no rows.
pub fn plan(
    engine: &QueryEngine,
    columns: &Columns,
    method: MethodName,
    (epsilon, delta): (f64, f64),
) -> Result<Planned> {
    if !(delta > 0.0 && delta < 1.0) {
        return Err(QueryError::NotPrivate(
            "a synthetic table is measured with Gaussian noise, which needs δ > 0 \
             (for example --delta 1e-9)"
                .into(),
        ));
    }
    let table = CodedTable::from_description(engine.description(), columns)?;
    let domain = table.domain()?;
    // MST and AIM count columns and pairs only: all planned now, for free.
    let width = table.columns.len();
    let mut sets = subsets(width, 1);
    sets.extend(subsets(width, 2));
    let plans = Plans::new(engine, &table, &sets)?;
    let sensitivity = plans.sensitivity();
    let refused = |e: dpkit_synth::Error| QueryError::NotPrivate(e.to_string());
    let (method, cost) = match method {
        MethodName::Mst => {
            let (mst, cost) = Mst::within(epsilon, delta, sensitivity, &domain).map_err(refused)?;
            (Method::Mst(mst), cost)
        }
        MethodName::Aim => {
            let (aim, cost) =
                Aim::within(epsilon, delta, sensitivity, |aim| aim).map_err(refused)?;
            (Method::Aim(aim), cost)
        }
    };
    Ok(Planned {
        table,
        domain,
        sensitivity,
        plans,
        method,
        cost,
    })
}

impl Planned {
    /// Charges the ledger, counts the marginals, runs MST and samples
    /// `rows` rows (default: as many as the model estimates). The charge is
    /// given back only when the data could not be read at all; a failure
    /// that may depend on the data keeps it.
    pub fn run<R: CryptoRng + ?Sized>(
        &self,
        engine: &QueryEngine,
        ledger: &Ledger,
        rows: Option<usize>,
        rng: &mut R,
    ) -> Result<Synthesized> {
        let most = self.most_rows();
        if rows.is_some_and(|n| n == 0 || n > most) {
            return Err(QueryError::NotPrivate(format!(
                "--rows must lie in 1..={most} for {} columns (at most {MAX_VALUES} values)",
                self.table.columns.len()
            )));
        }
        let label = format!(
            "SYNTH {} {} ({})",
            self.method_name(),
            self.table.table,
            self.names().join(", ")
        );
        let charge = ledger.charge(self.cost, &label)?;
        let mut marginals = EngineMarginals::new(engine, &self.table, &self.plans)?;
        let outcome = match &self.method {
            Method::Mst(mst) => mst.run_with_rng(&mut marginals, rng).map(|release| {
                let chosen = release.pairs().iter().map(|&(a, b)| vec![a, b]).collect();
                let noisy = mst_measurements(&release);
                (Measured::Mst(release), chosen, noisy)
            }),
            Method::Aim(aim) => aim.run_with_rng(&mut marginals, rng).map(|release| {
                let chosen = release.rounds().iter().map(|r| r.columns.clone()).collect();
                let noisy = aim_measurements(&release);
                (Measured::Aim(release), chosen, noisy)
            }),
        };
        let (release, chosen, noisy) = match outcome {
            Ok(released) => released,
            Err(error) => {
                let counted_nothing = marginals.counted_nothing();
                let failure = marginals.take_failure();
                // Given back only when the data could not be read before
                // any marginal was counted: a later failure may follow from
                // what the earlier counts read.
                if let (Some(QueryError::Unreadable(why)), true) = (&failure, counted_nothing) {
                    let why = why.clone();
                    ledger.refund(charge)?;
                    return Err(QueryError::Unreadable(why));
                }
                return Err(failure.unwrap_or_else(|| {
                    QueryError::FailedWhileRunning(format!("the synthesizer failed: {error}"))
                }));
            }
        };
        match &release {
            Measured::Mst(release) => self.sample(release, (chosen, noisy), rows, rng),
            Measured::Aim(release) => self.sample(release, (chosen, noisy), rows, rng),
        }
    }

    /// Rows drawn from the released model, with what was measured on the
    /// way (the marginals chosen, the noisy measurements): post-processing.
    fn sample<S: Release, R: CryptoRng + ?Sized>(
        &self,
        release: &S,
        (chosen, noisy): (Vec<Vec<usize>>, Vec<Noisy>),
        rows: Option<usize>,
        rng: &mut R,
    ) -> Result<Synthesized> {
        let failed = |e: dpkit_synth::Error| QueryError::FailedWhileRunning(e.to_string());
        let n = rows.unwrap_or_else(|| release.estimated_rows().clamp(1, self.most_rows()));
        let mut codes = release
            .sample_with_rng(n, Sampling::Round, rng)
            .map_err(failed)?;
        let names = self.names();
        let chosen = chosen
            .iter()
            .map(|set| set.iter().map(|&c| names[c].clone()).collect())
            .collect();
        let measured = noisy
            .iter()
            .map(|n| n.fit(&mut codes, &names))
            .collect::<Result<Vec<_>>>()?;
        let rows = output::decode(&self.table, &codes, rng)?;
        Ok(Synthesized {
            rows,
            codes,
            chosen,
            one_way: Fit::of_way(&measured, 1),
            measured,
        })
    }

    /// The most rows the table may have.
    pub fn most_rows(&self) -> usize {
        (MAX_VALUES / self.table.columns.len().max(1)).min(MAX_ROWS)
    }

    /// The method's name, as `--method` spells it, in capitals.
    pub fn method_name(&self) -> &'static str {
        match self.method {
            Method::Mst(_) => "MST",
            Method::Aim(_) => "AIM",
        }
    }

    /// The cost as people read it: ε and δ rounded up to four decimals
    /// and four significant digits.
    pub fn cost_text(&self) -> String {
        let (epsilon, delta) = (self.cost.loss.epsilon(), self.cost.loss.delta());
        format!("ε = {}, δ = {}", shown(epsilon), shown(delta))
    }

    /// The columns' names.
    pub fn names(&self) -> Vec<String> {
        self.table.columns.iter().map(|(n, _)| n.clone()).collect()
    }

    /// What `dpkit synth --explain` prints: the columns and their codes,
    /// the cost, the noise on each marginal and its expected error.
    pub fn explain(&self) -> Result<String> {
        let mut text = format!(
            "Synthetic table from {} by {}, {} column(s), each coded over a public domain (the \
             last code is missing: an integer that is missing, or a text outside the domain; \
             rows whose text is missing are left out of the marginals over its column):\n",
            self.table.table,
            match self.method {
                Method::Mst(_) => "MST (McKenna, Miklau & Sheldon 2021)",
                Method::Aim(_) => "AIM (McKenna, Mullins, Sheldon & Miklau 2022)",
            },
            self.table.columns.len()
        );
        for (name, coding) in &self.table.columns {
            let codes = match coding {
                Coding::Text(values) => format!("text, {} declared values", values.len()),
                Coding::Integer { low, high, width } => format!(
                    "integer, {} bin(s) of {width} in [{low}, {high}]",
                    coding.codes() - 1
                ),
                Coding::Declared { starts, high } => format!(
                    "integer, {} declared bin(s) in [{}, {high}]",
                    starts.len(),
                    starts[0]
                ),
            };
            text.push_str(&format!("  {name:<24} {codes}\n"));
        }
        text.push_str(&self.measured_text()?);
        let rho = self.cost.concentrated.map_or(0.0, |c| c.rho());
        text.push_str(&format!(
            "\nCost, charged once before any row is read: {} (ρ = {rho:.6} in concentrated \
             form).\n",
            self.cost_text()
        ));
        Ok(text)
    }
}

impl Planned {
    /// What `--explain` says of the measurements and their noise.
    fn measured_text(&self) -> Result<String> {
        let refused = |e: dpkit_synth::Error| QueryError::NotPrivate(e.to_string());
        let error = |sigma: f64| sigma * (2.0 / std::f64::consts::PI).sqrt();
        let r = self.table.columns.len();
        let mut text = format!(
            "\nMeasured (discrete Gaussian noise, one person moving any marginal by at most {} \
             in L1):\n",
            self.sensitivity
        );
        match &self.method {
            Method::Mst(mst) => {
                let (one, two) = mst.sigmas(&self.domain).map_err(refused)?;
                text.push_str(&format!(
                    "  {r} one-way marginals, σ = {one:.4}: E|error| {:.4} per cell\n",
                    error(one)
                ));
                if let Some(two) = two {
                    text.push_str(&format!(
                        "  {} two-way marginals, the pairs of a spanning tree chosen one by one \
                         by the exponential mechanism, σ = {two:.4}: E|error| {:.4} per cell \
                         (rare values merged first)\n",
                        r - 1,
                        error(two)
                    ));
                }
            }
            Method::Aim(aim) => {
                let one = aim.one_way_sigma_on(&self.domain).map_err(refused)?;
                text.push_str(&format!(
                    "  {r} one-way marginals, σ = {one:.4}: E|error| {:.4} per cell\n  then \
                     rounds until the budget is spent, each choosing by the exponential \
                     mechanism the 1- or 2-way marginal the model gets most wrong and \
                     measuring it, from the same σ (halved after a round that taught the \
                     model little), the model kept under 80 MB\n",
                    error(one)
                ));
            }
        }
        Ok(text)
    }
}

/// MST's measurements: each column's noisy 1-way marginal, then each
/// chosen pair's, over the codes the release merged.
fn mst_measurements(release: &dpkit_synth::MstRelease) -> Vec<Noisy> {
    let one_way = release.noisy_one_way().iter().enumerate();
    let mut noisy: Vec<Noisy> = one_way
        .map(|(column, values)| Noisy {
            columns: vec![column],
            values: values.clone(),
            maps: None,
        })
        .collect();
    let maps = release.code_maps();
    for (&(a, b), values) in release.pairs().iter().zip(release.noisy_pairs()) {
        noisy.push(Noisy {
            columns: vec![a, b],
            values: values.clone(),
            maps: Some(vec![maps[a].to_vec(), maps[b].to_vec()]),
        });
    }
    noisy
}

/// AIM's measurements: the first of each set of columns measured (a round
/// may measure a set again), over the original codes.
fn aim_measurements(release: &dpkit_synth::AimRelease) -> Vec<Noisy> {
    let mut noisy: Vec<Noisy> = Vec::new();
    for m in release.measurements() {
        if !noisy.iter().any(|n| n.columns == m.columns()) {
            noisy.push(Noisy {
                columns: m.columns().to_vec(),
                values: m.values().to_vec(),
                maps: None,
            });
        }
    }
    noisy
}

/// A release of either method.
enum Measured {
    Mst(dpkit_synth::MstRelease),
    Aim(dpkit_synth::AimRelease),
}

/// Four significant digits, rounded up (a figure a hair above a round
/// one, as 10⁻⁹ times 10¹² is in binary, shows as the round one).
fn shown(value: f64) -> String {
    if value <= 0.0 || !value.is_finite() {
        return value.to_string();
    }
    let scale = 10f64.powi(3 - value.log10().floor() as i32);
    let steps = value * scale;
    let steps = if (steps - steps.round()).abs() < 1e-6 {
        steps.round()
    } else {
        steps.ceil()
    };
    let rounded = steps / scale;
    if (1e-3..1e6).contains(&rounded) {
        format!("{rounded}")
    } else {
        format!("{rounded:e}")
    }
}
