//! Composition, the budget that refuses overspending, and sensitivity tools.

use dpkit_core::accounting::{
    PrivacyBudget, PrivacyLoss, advanced_composition, group_privacy, parallel_composition,
    sequential_composition,
};
use dpkit_core::rng::InsecureSeededRng;
use dpkit_core::sensitivity::{
    GaussianMixture, Neighbouring, Norm, Sensitivity, sample_sensitivity,
};

fn pure(epsilon: f64) -> PrivacyLoss {
    PrivacyLoss::pure(epsilon).unwrap()
}

#[test]
fn composition_rules() {
    let steps = [
        pure(0.1),
        PrivacyLoss::approximate(0.2, 1e-6).unwrap(),
        pure(0.5),
    ];
    let sequential = sequential_composition(&steps);
    assert!((sequential.epsilon() - 0.8).abs() < 1e-12);
    assert_eq!(sequential.delta(), 1e-6);
    let parallel = parallel_composition(&steps);
    assert_eq!((parallel.epsilon(), parallel.delta()), (0.5, 1e-6));
    let group = group_privacy(PrivacyLoss::approximate(0.5, 1e-6).unwrap(), 3).unwrap();
    assert_eq!(group.epsilon(), 1.5);
    assert!((group.delta() - 3.0 * 1f64.exp() * 1e-6).abs() < 1e-15);
    // Advanced composition beats sequential for many small steps, never loses.
    let many = advanced_composition(pure(0.01), 10_000, 1e-6).unwrap();
    let expected =
        (2.0 * 10_000.0 * 1e6f64.ln()).sqrt() * 0.01 + 10_000.0 * 0.01 * 0.01f64.exp_m1();
    assert!((many.epsilon() - expected).abs() < 1e-9 && many.epsilon() < 100.0);
    assert_eq!(many.delta(), 1e-6);
    let few = advanced_composition(pure(1.0), 2, 1e-6).unwrap();
    assert_eq!((few.epsilon(), few.delta()), (2.0, 0.0));
}

#[test]
fn the_budget_refuses_to_be_overspent_and_releases_nothing_when_it_refuses() {
    let mut budget = PrivacyBudget::new(PrivacyLoss::approximate(0.3, 1e-6).unwrap());
    budget.spend(pure(0.1)).unwrap();
    budget.spend(pure(0.2)).unwrap(); // decimal spends add up exactly
    assert_eq!(budget.remaining().epsilon(), 0.0);
    let mut released = false;
    let refused = budget.charge_then(pure(1e-9), || released = true);
    assert!(matches!(
        refused,
        Err(dpkit_core::Error::BudgetExceeded { .. })
    ));
    assert!(!released, "nothing runs when the spend is refused");
    assert!((budget.spent().epsilon() - 0.3).abs() < 1e-15);

    let mut budget = PrivacyBudget::new(PrivacyLoss::approximate(1.0, 1e-6).unwrap());
    assert!(
        budget
            .spend(PrivacyLoss::approximate(0.1, 2e-6).unwrap())
            .is_err(),
        "δ is budgeted too"
    );
    assert_eq!(budget.spent(), PrivacyLoss::zero());
    budget
        .spend(PrivacyLoss::approximate(0.1, 1e-6).unwrap())
        .unwrap();
    assert!((budget.remaining().epsilon() - 0.9).abs() < 1e-12);
}

#[test]
fn global_sensitivities() {
    assert_eq!(Sensitivity::count(), Sensitivity { l1: 1.0, l2: 1.0 });
    assert_eq!(
        Sensitivity::bounded_sum(-5.0, 3.0, Neighbouring::AddRemove)
            .unwrap()
            .l1,
        5.0
    );
    assert_eq!(
        Sensitivity::bounded_sum(-5.0, 3.0, Neighbouring::Replace)
            .unwrap()
            .l1,
        8.0
    );
    assert_eq!(Sensitivity::bounded_mean(17.0, 90.0, 73).unwrap().l1, 1.0);
    assert_eq!(
        Sensitivity::histogram(1).unwrap(),
        Sensitivity { l1: 1.0, l2: 1.0 }
    );
    let nine = Sensitivity::histogram(9).unwrap();
    assert_eq!((nine.l1, nine.l2), (9.0, 3.0));
}

#[test]
fn sampled_sensitivity_of_one_height_matches_the_closed_form() {
    // Reference §Sensitivity sampling: E|h − h'| for one record of the mixture.
    let (mu_m, sd_m, mu_f, sd_f) = (178.0f64, 7.0f64, 162.0f64, 6.5f64);
    let pooled = (2.0 * (sd_m * sd_m + sd_f * sd_f)).sqrt();
    let m = (mu_m - mu_f) / pooled;
    let pi = std::f64::consts::PI;
    let closed_form = (sd_m + sd_f + pooled * ((-m * m).exp() + pi.sqrt() * m * libm::erf(m)))
        / (2.0 * pi.sqrt());
    let heights = GaussianMixture::new(&[(0.5, mu_m, sd_m), (0.5, mu_f, sd_f)]).unwrap();
    let mut rng = InsecureSeededRng::from_seed_for_testing(7);
    let result = sample_sensitivity(
        |r: &mut InsecureSeededRng| heights.sample(r),
        |people: &[f64]| vec![people[0]],
        1,
        Norm::L1,
        20_000,
        0.05,
        0.05,
        &mut rng,
    )
    .unwrap();
    let relative = (result.mean_distance / closed_form - 1.0).abs();
    assert!(
        relative < 0.02,
        "sampled mean {} vs closed form {closed_form}",
        result.mean_distance
    );
    // The sensitivity is a high order statistic, above the typical distance.
    assert!(result.sensitivity > result.mean_distance);
    assert!(result.distances.windows(2).all(|w| w[0] <= w[1]));
    // L2 of a vector query.
    let pair = |people: &[f64]| vec![people[0], people[0] * 2.0];
    let l2 = sample_sensitivity(
        |r: &mut InsecureSeededRng| heights.sample(r),
        pair,
        1,
        Norm::L2,
        1_000,
        0.1,
        0.1,
        &mut rng,
    )
    .unwrap();
    let l1 = sample_sensitivity(
        |r: &mut InsecureSeededRng| heights.sample(r),
        pair,
        1,
        Norm::L1,
        1_000,
        0.1,
        0.1,
        &mut rng,
    )
    .unwrap();
    assert!((l2.mean_distance / l1.mean_distance - 5f64.sqrt() / 3.0).abs() < 0.1);
    // Too few samples for the confidence asked for is an error, not a guess.
    assert!(
        sample_sensitivity(
            |r: &mut InsecureSeededRng| heights.sample(r),
            pair,
            1,
            Norm::L1,
            10,
            0.01,
            0.01,
            &mut rng
        )
        .is_err()
    );
}
