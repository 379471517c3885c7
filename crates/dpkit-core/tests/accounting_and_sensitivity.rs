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

/// ε for k releases at δ = 1e-6 from Google's dp-accounting 0.6.0, by
/// `support/dp_accounting_reference.py`: (mechanism, σ/Δ or b/Δ, k, RDP ε,
/// PLD ε). PLD's is an upper bound on the true loss, within a little of it.
const DP_ACCOUNTING: [(&str, f64, u32, f64, f64); 20] = [
    ("Gaussian", 1.0, 1, 5.221540e+00, 4.886554e+00),
    ("Gaussian", 1.0, 10, 2.055199e+01, 1.942366e+01),
    ("Gaussian", 1.0, 100, 1.007215e+02, 9.671727e+01),
    ("Gaussian", 1.0, 1000, 6.663742e+02, 6.493851e+02),
    ("Gaussian", 5.0, 1, 8.999385e-01, 8.341176e-01),
    ("Gaussian", 5.0, 10, 3.131090e+00, 2.921601e+00),
    ("Gaussian", 5.0, 100, 1.168863e+01, 1.099715e+01),
    ("Gaussian", 5.0, 1000, 5.172372e+01, 4.931928e+01),
    ("Gaussian", 54.0, 1, 7.241453e-02, 6.533640e-02),
    ("Gaussian", 54.0, 10, 2.480304e-01, 2.240228e-01),
    ("Gaussian", 54.0, 100, 8.288920e-01, 7.679056e-01),
    ("Gaussian", 54.0, 1000, 2.876618e+00, 2.682920e+00),
    ("Laplace", 10.0, 1, 1.050751e-01, 9.999800e-02),
    ("Laplace", 10.0, 10, 9.989814e-01, 9.989781e-01),
    ("Laplace", 10.0, 100, 4.984174e+00, 4.692667e+00),
    ("Laplace", 10.0, 1000, 2.004664e+01, 1.895029e+01),
    ("Laplace", 100.0, 1, 1.507514e-02, 9.998000e-03),
    ("Laplace", 100.0, 10, 9.898137e-02, 9.897809e-02),
    ("Laplace", 100.0, 100, 4.212797e-01, 3.913255e-01),
    ("Laplace", 100.0, 1000, 1.465842e+00, 1.362925e+00),
];

/// The standard normal CDF.
fn phi(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The true ε at δ of a Gaussian mechanism with μ = Δ/σ (k Gaussian
/// releases are one with μ√k): the root of Balle & Wang's exact privacy
/// profile δ(ε) = Φ(μ/2 − ε/μ) − e^ε·Φ(−μ/2 − ε/μ), which falls with ε.
fn exact_gaussian_epsilon(mu: f64, delta: f64) -> f64 {
    let profile = |e: f64| phi(mu / 2.0 - e / mu) - e.exp() * phi(-mu / 2.0 - e / mu);
    let (mut low, mut high) = (0.0, 1.0);
    while profile(high) > delta {
        high *= 2.0;
    }
    for _ in 0..200 {
        let middle = (low + high) / 2.0;
        if profile(middle) > delta {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}

#[test]
fn concentrated_accounting_never_comes_out_below_the_true_loss_and_matches_dp_accounting() {
    use dpkit_core::accounting::concentrated::epsilon_of;
    let delta = 1e-6;
    for (mechanism, parameter, k, rdp, pld) in DP_ACCOUNTING {
        let k = f64::from(k);
        let ours = if mechanism == "Gaussian" {
            // ρ = Δ²/(2σ²) per release.
            let ours = epsilon_of(k / (2.0 * parameter * parameter), delta).unwrap();
            let exact = exact_gaussian_epsilon(k.sqrt() / parameter, delta);
            assert!(
                ours >= exact,
                "{mechanism} {parameter} ×{k}: {ours} < exact {exact}"
            );
            // The same conversion as dp-accounting's RDP, searched over
            // every order rather than its list of orders: at least as tight,
            // and within 2% of it (its list is sparse at large orders).
            assert!(
                ours <= rdp * 1.0001 && ours >= rdp * 0.98,
                "{mechanism} {parameter} ×{k}: {ours} against RDP {rdp}"
            );
            ours
        } else {
            // An ε-DP release is (ε²/2)-zCDP; here ε = Δ/b.
            let epsilon = 1.0 / parameter;
            epsilon_of(k * epsilon * epsilon / 2.0, delta).unwrap()
        };
        assert!(
            ours >= pld,
            "{mechanism} {parameter} ×{k}: {ours} below PLD's {pld}"
        );
    }
}

#[test]
fn the_filter_admits_a_hundred_gaussian_counts_of_the_issues_error_and_stops_an_adaptive_analyst() {
    use dpkit_core::accounting::{ConcentratedLoss, Filter};
    let filter = Filter::new(PrivacyLoss::approximate(1.0, 1e-6).unwrap()).unwrap();
    let rho = filter.concentrated_rho().unwrap();
    // 100 equal Gaussian counts: E|X| = σ√(2/π) with σ = √(100/(2ρ)).
    let error = |k: f64| (k / (2.0 * rho)).sqrt() * (2.0 / std::f64::consts::PI).sqrt();
    assert!(
        error(100.0) < 45.0 && error(1000.0) < 140.0,
        "{}",
        error(100.0)
    );
    // An analyst who picks each σ from the last answer (here: halves it
    // whenever the answer was large) never spends past ρ: each charge is
    // admitted only while the total stays within it.
    let mut rng = InsecureSeededRng::from_seed_for_testing(30);
    let mut spent = Some(ConcentratedLoss::default());
    let mut sigma = 400.0;
    let mut admitted = 0;
    for _ in 0..10_000 {
        let cost = ConcentratedLoss::gaussian(1.0, sigma, 0.0, 0.0).unwrap();
        if !filter.concentrated_fits(spent, Some(cost)) {
            break;
        }
        spent = spent.map(|s| s.and(cost));
        admitted += 1;
        let answer: f64 = dpkit_core::sampling::DiscreteGaussianSampler::new(sigma)
            .unwrap()
            .sample(&mut rng) as f64;
        sigma = if answer.abs() > sigma {
            sigma / 2.0
        } else {
            sigma * 1.01
        };
    }
    let total = spent.unwrap().rho();
    assert!(
        admitted > 10 && total <= rho,
        "{admitted} charges, ρ {total} of {rho}"
    );
}
