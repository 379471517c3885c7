//! What MST and AIM share as mechanisms: a run on exact marginals, and a
//! release whose model rows are drawn from.

use dpkit_core::accounting::ConcentratedLoss;
use dpkit_core::rng::SecureRng;
use rand_core::CryptoRng;

use crate::error::Result;
use crate::marginals::{Marginals, Table};
use crate::model::Model;
use crate::sample::Sampling;

/// A mechanism that releases a synthetic-data model from exact marginals
/// ([`crate::Mst`], [`crate::Aim`]).
pub trait Synthesizer {
    /// What a run releases.
    type Release: Release;

    /// Runs on `data` with `rng` for the noise and the selections. Each
    /// implementation's privacy argument is in its `# Privacy` section.
    fn run_with_rng<M: Marginals + ?Sized, R: CryptoRng + ?Sized>(
        &self,
        data: &mut M,
        rng: &mut R,
    ) -> Result<Self::Release>;

    /// Runs on `data` with noise from a generator keyed by the operating
    /// system: the way to make a real release.
    fn run<M: Marginals + ?Sized>(&self, data: &mut M) -> Result<Self::Release> {
        let mut rng = SecureRng::from_os()?;
        self.run_with_rng(data, &mut rng)
    }
}

/// A released model, its cost, and rows drawn from it.
pub trait Release {
    /// The fitted model.
    fn model(&self) -> &Model;

    /// The loss charged.
    fn cost(&self) -> ConcentratedLoss;

    /// Rows drawn from the model, over the model's codes, turned into rows
    /// over the original domain (the identity unless the release merged
    /// codes), with `rng` for any choice it makes.
    fn original_codes<R: CryptoRng + ?Sized>(&self, drawn: Table, _rng: &mut R) -> Result<Table> {
        Ok(drawn)
    }

    /// `rows` synthetic rows over the original domain, drawn with `rng`
    /// (post-processing: any generator is safe).
    fn sample_with_rng<R: CryptoRng + ?Sized>(
        &self,
        rows: usize,
        method: Sampling,
        rng: &mut R,
    ) -> Result<Table> {
        let drawn = self.model().sample_with_rng(rows, method, rng)?;
        self.original_codes(drawn, rng)
    }

    /// The estimated number of rows (the model's total), rounded.
    fn estimated_rows(&self) -> usize {
        self.model().total().round() as usize
    }

    /// `rows` synthetic rows drawn with a generator keyed by the operating
    /// system.
    fn sample(&self, rows: usize, method: Sampling) -> Result<Table> {
        let mut rng = SecureRng::from_os()?;
        self.sample_with_rng(rows, method, &mut rng)
    }
}
