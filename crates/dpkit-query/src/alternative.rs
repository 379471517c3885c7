//! Whether Gaussian noise would serve queries like this one better than
//! `auto`'s pure-ε noise under the ledger's two accountants: as many more
//! of them, each with less error. `--explain` says so. Many small queries
//! are where it pays: the concentrated accountant charges a Gaussian
//! release far less than its (ε, δ) (see `dpkit_core::accounting::filter`).
//! Where the analyst asks for an error rather than an ε (`--target-error`)
//! with `auto` and a δ, `auto` chooses: the noise that meets the error and
//! that the budget can pay for more often.
//! Nothing here spends or reads data: the plans come from the query and
//! the settings, the counts from the ledger's totals (which charges alone
//! decide, and the analyst sees).

use dpkit_ledger::Ledger;
use dpkit_release::{
    MechanismChoice, NoisePlan, ReleaseSettings, TargetError, plan_noise, smallest_epsilon,
};

use crate::error::Result;
use crate::plan::PrivateQuery;

/// A query explained against a budget (`QueryEngine::explain_against`).
#[derive(Debug, Clone)]
pub struct Explained {
    /// What `--explain` prints for the query.
    pub explanation: String,
    /// What running it would cost.
    pub cost: dpkit_core::accounting::Cost,
    /// How many more queries like it the budget can pay for.
    pub queries_left: u64,
    /// Gaussian noise that would serve them better, if any.
    pub gaussian: Option<GaussianAlternative>,
}

/// Gaussian noise for queries like one asked with `auto`.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianAlternative {
    /// The ε to ask for with `--mechanism gaussian`.
    pub epsilon: f64,
    /// The δ to ask for with it: the query's own, or else the budget's.
    pub delta: f64,
    /// How many more such queries the budget can pay for: at least as many
    /// as with `auto`'s noise.
    pub queries: u64,
    /// Each measurement's label and E|error|, with Gaussian noise and with
    /// `auto`'s; every one is smaller with Gaussian noise.
    pub errors: Vec<(String, f64, f64)>,
}

/// The settings chosen for an error target (`QueryEngine::explain_target`).
#[derive(Debug, Clone)]
pub struct Targeted {
    /// The query's settings with the ε found, and the noise chosen.
    pub settings: ReleaseSettings,
    /// What `--explain` prints for the query at those settings.
    pub explanation: String,
    /// How many more queries like it the budget can pay for.
    pub queries_left: u64,
    /// Where `auto` chose Gaussian noise: the ε that `auto`'s pure-ε noise
    /// would have needed, and how many such queries the budget pays for.
    pub passed_over: Option<(f64, u64)>,
}

/// The smallest ε at which `query` meets `target` under `settings`, with
/// its explanation and how many such queries `ledger` pays for; with
/// `auto` and a δ, Gaussian noise instead where [`gaussian_for_target`]
/// finds it better (`passed_over` then says what it passed over).
pub(crate) fn cheapest_for_target(
    query: &PrivateQuery,
    settings: &ReleaseSettings,
    target: TargetError,
    ledger: &Ledger,
) -> Result<Targeted> {
    let (epsilon, plan) = smallest_epsilon(&query.measured, settings, target)?;
    let pure_settings = ReleaseSettings {
        epsilon,
        ..*settings
    };
    let left = ledger.how_many_more(plan.charge())?;
    let (chosen, plan, queries_left, passed_over) =
        match gaussian_for_target(query, settings, target, ledger, (&plan, left))? {
            Some((gaussian, gaussian_plan, more)) => {
                (gaussian, gaussian_plan, more, Some((epsilon, left)))
            }
            None => (pure_settings, plan, left, None),
        };
    Ok(Targeted {
        explanation: query.explanation(&plan, &chosen),
        settings: chosen,
        queries_left,
        passed_over,
    })
}

/// With `auto` and a δ: the smallest Gaussian ε that meets `target`, its
/// plan and how many such queries the budget pays for, if that is strictly
/// more than the `left` of auto's own `plan` and charging it would not
/// close the concentrated accountant.
fn gaussian_for_target(
    query: &PrivateQuery,
    settings: &ReleaseSettings,
    target: TargetError,
    ledger: &Ledger,
    (plan, left): (&NoisePlan, u64),
) -> Result<Option<(ReleaseSettings, NoisePlan, u64)>> {
    if settings.mechanism != MechanismChoice::Auto || settings.delta <= 0.0 {
        return Ok(None);
    }
    let gaussian = ReleaseSettings {
        mechanism: MechanismChoice::Gaussian,
        ..*settings
    };
    // Gaussian noise that cannot meet the target is no alternative.
    let Ok((found, gaussian_plan)) = smallest_epsilon(&query.measured, &gaussian, target) else {
        return Ok(None);
    };
    // Gaussian noise beside a threshold has no concentrated form: charging
    // it would close that accountant for the rest of the budget.
    let closes = gaussian_plan.concentrated.is_none() && plan.concentrated.is_some();
    let more = ledger.how_many_more(gaussian_plan.charge())?;
    if closes || more <= left {
        return Ok(None);
    }
    let chosen = ReleaseSettings {
        epsilon: found,
        ..gaussian
    };
    Ok(Some((chosen, gaussian_plan, more)))
}

/// Steps of the search for the largest ε the budget pays for often enough.
const SEARCH_STEPS: usize = 60;

/// `x` rounded down to three significant digits.
fn three_digits_down(x: f64) -> f64 {
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).floor() / scale
}

/// The Gaussian alternative to `auto`'s plan `chosen` for `query`, of
/// which the budget in `ledger` pays for `wanted` more, if there is a
/// better one.
pub(crate) fn gaussian_alternative(
    query: &PrivateQuery,
    settings: &ReleaseSettings,
    (chosen, wanted): (&NoisePlan, u64),
    ledger: &Ledger,
) -> Result<Option<GaussianAlternative>> {
    let state = ledger.state()?;
    if settings.mechanism != MechanismChoice::Auto
        || state.concentrated.is_none()
        || chosen.concentrated.is_none()
    {
        return Ok(None);
    }
    let delta = match settings.delta {
        0.0 => state.total_delta,
        given => given,
    };
    if wanted == 0 || delta <= 0.0 {
        return Ok(None);
    }
    let gaussian = |epsilon: f64| {
        let at = ReleaseSettings {
            epsilon,
            delta,
            mechanism: MechanismChoice::Gaussian,
            ..*settings
        };
        plan_noise(&query.measured, &at).ok()
    };
    let pays = |plan: &Option<NoisePlan>| -> Result<bool> {
        match plan {
            Some(plan) => Ok(ledger.how_many_more(plan.charge())? >= wanted),
            None => Ok(false),
        }
    };
    // The count the budget pays for falls as ε grows: bisect on log ε.
    let (mut low, mut high) = (settings.epsilon / 1e3, settings.epsilon * 1e3);
    if !pays(&gaussian(low))? {
        return Ok(None);
    }
    for _ in 0..SEARCH_STEPS {
        let middle = (low * high).sqrt();
        match pays(&gaussian(middle))? {
            true => low = middle,
            false => high = middle,
        }
    }
    let epsilon = three_digits_down(low);
    let plan = gaussian(epsilon);
    let (Some(found), true) = (&plan, pays(&plan)?) else {
        return Ok(None);
    };
    let errors: Vec<(String, f64, f64)> = found
        .noises
        .iter()
        .zip(&chosen.noises)
        .enumerate()
        .map(|(m, (g, a))| {
            let label = query.measured.measurement_label(m).unwrap_or_default();
            (label, g.expected_absolute_error, a.expected_absolute_error)
        })
        .collect();
    if errors.iter().any(|(_, g, a)| g >= a) {
        return Ok(None);
    }
    Ok(Some(GaussianAlternative {
        epsilon,
        delta,
        queries: ledger.how_many_more(found.charge())?,
        errors,
    }))
}

#[cfg(test)]
mod tests {
    use super::three_digits_down;

    #[test]
    fn rounding_keeps_three_digits_and_never_rounds_up() {
        assert_eq!(three_digits_down(0.0123456), 0.0123);
        assert_eq!(three_digits_down(4.5678), 4.56);
        assert_eq!(three_digits_down(1234.5), 1230.0);
        assert!(three_digits_down(0.3) <= 0.3);
    }
}
