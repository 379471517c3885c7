//! The audit: choose an event on one half of the samples, test it on the other.

use std::fmt;

use dpkit_core::accounting::PrivacyLoss;

use crate::bounds::EventCounts;
use crate::error::{AuditError, Result};
use crate::event::OutputEvent;
use crate::search::best_separation;

/// How thoroughly to audit.
///
/// ```
/// use dpkit_audit::AuditSettings;
/// let quick = AuditSettings::default();
/// assert_eq!(quick.samples_per_input, 200_000);
/// let thorough = AuditSettings { samples_per_input: 10_000_000, ..quick };
/// assert!(thorough.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuditSettings {
    /// Outputs drawn from each of the two inputs (half choose the event, half test it).
    pub samples_per_input: usize,
    /// Probability that the reported lower bound is really below the realised ε.
    pub confidence: f64,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            samples_per_input: 200_000,
            confidence: 0.99,
        }
    }
}

impl AuditSettings {
    /// Checks the settings: at least 1,000 samples, confidence in (0, 1).
    pub fn validate(&self) -> Result<()> {
        if self.samples_per_input < 1_000 {
            return Err(AuditError::InvalidSetting {
                name: "samples",
                reason: format!(
                    "need at least 1000 per input, got {}",
                    self.samples_per_input
                ),
            });
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(AuditError::InvalidSetting {
                name: "confidence",
                reason: format!("must lie strictly between 0 and 1, got {}", self.confidence),
            });
        }
        Ok(())
    }
}

/// Outputs of one mechanism on two neighbouring inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighbouringOutputs {
    /// The mechanism's name, for the report.
    pub mechanism: String,
    /// What the mechanism claims.
    pub declared: PrivacyLoss,
    /// The first input, described.
    pub first_input: String,
    /// The second input, described.
    pub second_input: String,
    /// Outputs from the first input.
    pub first: Vec<f64>,
    /// Outputs from the second input.
    pub second: Vec<f64>,
}

/// What an audit found.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditReport {
    /// The mechanism audited.
    pub mechanism: String,
    /// Its declared guarantee.
    pub declared: PrivacyLoss,
    /// The two inputs.
    pub first_input: String,
    /// The two inputs.
    pub second_input: String,
    /// Outputs drawn per input.
    pub samples_per_input: usize,
    /// The confidence of the lower bound.
    pub confidence: f64,
    /// The event that best separated the selection halves.
    pub event: OutputEvent,
    /// Whether the event is more likely from the first input.
    pub favours_first: bool,
    /// The event's counts in the validation halves.
    pub validation: EventCounts,
    /// `ln(p̂_favoured / p̂_other)` on the validation halves.
    pub epsilon_estimate: f64,
    /// Realised ε is at least this, with probability ≥ `confidence`.
    pub epsilon_lower_bound: f64,
}

impl AuditReport {
    /// True when the lower bound exceeds the declared ε: a proven violation
    /// (at the stated confidence).
    pub fn violation_found(&self) -> bool {
        self.epsilon_lower_bound > self.declared.epsilon()
    }

    /// The event's probability under the first and the second input
    /// (validation halves).
    pub fn event_probabilities(&self) -> (f64, f64) {
        let c = &self.validation;
        let favoured = c.favoured as f64 / c.favoured_trials as f64;
        let other = c.other as f64 / c.other_trials as f64;
        if self.favours_first {
            (favoured, other)
        } else {
            (other, favoured)
        }
    }
}

/// Audits a mechanism from its outputs on two neighbouring inputs.
///
/// The first half of each sample chooses the event that best separates the
/// two output distributions ([`crate::search`]); the second half, independent
/// of that choice, bounds the event's two probabilities, and so the realised
/// ε from below, at `settings.confidence`.
///
/// ```
/// use dpkit_audit::{AuditSettings, NeighbouringOutputs, audit};
/// use dpkit_core::accounting::PrivacyLoss;
/// // A "mechanism" that reveals its input: every output separates them.
/// let outputs = NeighbouringOutputs {
///     mechanism: "identity".into(),
///     declared: PrivacyLoss::pure(1.0).unwrap(),
///     first_input: "0".into(),
///     second_input: "1".into(),
///     first: vec![0.0; 2000],
///     second: vec![1.0; 2000],
/// };
/// let report = audit(&outputs, &AuditSettings { samples_per_input: 2000, confidence: 0.99 }).unwrap();
/// assert!(report.violation_found());
/// ```
pub fn audit(outputs: &NeighbouringOutputs, settings: &AuditSettings) -> Result<AuditReport> {
    settings.validate()?;
    let n = settings.samples_per_input;
    for sample in [&outputs.first, &outputs.second] {
        if sample.len() != n {
            return Err(AuditError::InvalidSetting {
                name: "samples",
                reason: format!("expected {n} outputs per input, got {}", sample.len()),
            });
        }
        if sample.iter().any(|y| !y.is_finite()) {
            return Err(AuditError::NonFiniteOutput);
        }
    }
    let delta = outputs.declared.delta();
    let half = n / 2;
    let (select_first, test_first) = outputs.first.split_at(half);
    let (select_second, test_second) = outputs.second.split_at(half);
    let separation = best_separation(select_first, select_second, delta);
    let count = |sample: &[f64]| {
        sample
            .iter()
            .filter(|&&y| separation.event.contains(y))
            .count() as u64
    };
    let (in_first, in_second) = (count(test_first), count(test_second));
    let validation = if separation.favours_first {
        EventCounts {
            favoured: in_first,
            favoured_trials: test_first.len() as u64,
            other: in_second,
            other_trials: test_second.len() as u64,
        }
    } else {
        EventCounts {
            favoured: in_second,
            favoured_trials: test_second.len() as u64,
            other: in_first,
            other_trials: test_first.len() as u64,
        }
    };
    Ok(AuditReport {
        mechanism: outputs.mechanism.clone(),
        declared: outputs.declared,
        first_input: outputs.first_input.clone(),
        second_input: outputs.second_input.clone(),
        samples_per_input: n,
        confidence: settings.confidence,
        event: separation.event,
        favours_first: separation.favours_first,
        epsilon_estimate: validation.epsilon_estimate(),
        epsilon_lower_bound: validation.epsilon_lower_bound(delta, 1.0 - settings.confidence),
        validation,
    })
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p_first, p_second) = self.event_probabilities();
        let favoured = if self.favours_first {
            &self.first_input
        } else {
            &self.second_input
        };
        let half = self.samples_per_input / 2;
        let rows = [
            ("mechanism", self.mechanism.clone()),
            (
                "neighbouring inputs",
                format!("{}  |  {}", self.first_input, self.second_input),
            ),
            (
                "samples per input",
                format!(
                    "{} ({half} choose the event, {} test it)",
                    self.samples_per_input,
                    self.samples_per_input - half
                ),
            ),
            (
                "separating event",
                format!("{}  (more likely from {favoured})", self.event),
            ),
            (
                "P(event) per input",
                format!("{p_first:.6}  |  {p_second:.6}"),
            ),
            (
                "realised ε, estimate",
                format!("{:.4}", self.epsilon_estimate),
            ),
            (
                "realised ε, lower bound",
                format!(
                    "{:.4} at {} confidence",
                    self.epsilon_lower_bound,
                    percent(self.confidence)
                ),
            ),
            (
                "declared",
                if self.declared.delta() > 0.0 {
                    format!(
                        "ε = {}, δ = {}",
                        self.declared.epsilon(),
                        self.declared.delta()
                    )
                } else {
                    format!("ε = {}", self.declared.epsilon())
                },
            ),
            (
                "verdict",
                if self.violation_found() {
                    "VIOLATION: the realised ε exceeds the declared ε".to_string()
                } else {
                    "pass: no violation found (evidence, not proof)".to_string()
                },
            ),
        ];
        for (label, value) in rows {
            writeln!(f, "{label:<24} {value}")?;
        }
        Ok(())
    }
}

/// A confidence as a percentage with just the digits it needs:
/// 0.99 → "99%", 1 − 10⁻⁷ → "99.99999%".
fn percent(confidence: f64) -> String {
    let text = format!("{:.10}", confidence * 100.0);
    let trimmed = text.trim_end_matches('0').trim_end_matches('.');
    format!("{trimmed}%")
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentages_carry_only_the_digits_they_need() {
        assert_eq!(super::percent(0.99), "99%");
        assert_eq!(super::percent(1.0 - 1e-7), "99.99999%");
        assert_eq!(super::percent(0.5), "50%");
    }
}
