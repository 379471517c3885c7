//! Bad parameters and bad values get typed errors, never panics, and no
//! error message echoes a private value.

use dpkit_core::Error;
use dpkit_core::accounting::{PrivacyLoss, advanced_composition, group_privacy};
use dpkit_core::accuracy::NoiseAccuracy;
use dpkit_core::mechanism::{
    BinaryRandomizedResponse, DiscreteGaussian, DiscreteStaircase, ExponentialMechanism, Gaussian,
    KaryRandomizedResponse, Laplace, RealMechanism, ReportNoisyMax, Staircase, StaircaseGamma,
    TwoSidedGeometric, analytic_gaussian_sigma,
};
use dpkit_core::sensitivity::{Neighbouring, Sensitivity};
use proptest::prelude::*;

const BAD_POSITIVE: [f64; 5] = [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

fn is_parameter_error<T: std::fmt::Debug>(result: dpkit_core::Result<T>, name: &str) -> bool {
    matches!(result, Err(Error::InvalidParameter { name: n, .. }) if n == name)
}

#[test]
fn every_constructor_rejects_bad_epsilon_and_sensitivity() {
    for bad in BAD_POSITIVE {
        assert!(is_parameter_error(Laplace::new(bad, 1.0), "epsilon"));
        assert!(is_parameter_error(Laplace::new(1.0, bad), "sensitivity"));
        assert!(is_parameter_error(Staircase::new(bad, 1.0), "epsilon"));
        assert!(is_parameter_error(Staircase::new(1.0, bad), "sensitivity"));
        assert!(is_parameter_error(
            TwoSidedGeometric::new(bad, 1),
            "epsilon"
        ));
        assert!(is_parameter_error(
            DiscreteStaircase::new(bad, 3),
            "epsilon"
        ));
        assert!(is_parameter_error(Gaussian::new(bad, 1e-6, 1.0), "epsilon"));
        assert!(is_parameter_error(
            Gaussian::new(1.0, 1e-6, bad),
            "sensitivity"
        ));
        assert!(is_parameter_error(
            DiscreteGaussian::new(bad, 1e-6, 1),
            "epsilon"
        ));
        assert!(is_parameter_error(
            KaryRandomizedResponse::new(bad, 3),
            "epsilon"
        ));
        assert!(is_parameter_error(
            ExponentialMechanism::new(bad, 1.0),
            "epsilon"
        ));
        assert!(is_parameter_error(
            ExponentialMechanism::new(1.0, bad),
            "utility sensitivity"
        ));
        assert!(is_parameter_error(ReportNoisyMax::new(bad, 1.0), "epsilon"));
        assert!(is_parameter_error(PrivacyLoss::pure(bad), "epsilon"));
    }
    assert!(is_parameter_error(
        TwoSidedGeometric::new(1.0, 0),
        "sensitivity"
    ));
    assert!(is_parameter_error(
        DiscreteStaircase::new(1.0, 0),
        "sensitivity"
    ));
    assert!(is_parameter_error(
        DiscreteStaircase::with_rise(1.0, 5, 0),
        "rise"
    ));
    assert!(is_parameter_error(
        DiscreteStaircase::with_rise(1.0, 5, 6),
        "rise"
    ));
    assert!(is_parameter_error(
        DiscreteGaussian::new(1.0, 1e-6, 0),
        "sensitivity"
    ));
}

#[test]
fn probabilities_and_gamma_outside_their_range_are_rejected() {
    for bad in [-0.1, 1.1, f64::NAN] {
        assert!(is_parameter_error(
            Staircase::with_gamma(1.0, 1.0, StaircaseGamma::Value(bad)),
            "gamma"
        ));
    }
    for bad in [0.0, 1.0, -0.5, 2.0, f64::NAN] {
        assert!(is_parameter_error(
            BinaryRandomizedResponse::new(bad),
            "coin probability"
        ));
    }
    for bad in [0.0, 1.0, -1e-6, f64::NAN] {
        assert!(is_parameter_error(Gaussian::new(1.0, bad, 1.0), "delta"));
        assert!(is_parameter_error(
            analytic_gaussian_sigma(1.0, bad, 1.0),
            "delta"
        ));
    }
    assert!(is_parameter_error(
        PrivacyLoss::approximate(1.0, 1.0),
        "delta"
    ));
    assert!(is_parameter_error(
        KaryRandomizedResponse::new(1.0, 1),
        "categories"
    ));
    let laplace = Laplace::new(1.0, 1.0).unwrap();
    for bad in [0.0, 1.0, f64::NAN] {
        assert!(is_parameter_error(
            laplace.confidence_half_width(bad),
            "alpha"
        ));
    }
    assert!(is_parameter_error(
        group_privacy(PrivacyLoss::pure(1.0).unwrap(), 0),
        "group size"
    ));
    assert!(is_parameter_error(
        advanced_composition(PrivacyLoss::pure(1.0).unwrap(), 3, 0.0),
        "delta slack"
    ));
    assert!(is_parameter_error(
        Sensitivity::bounded_sum(5.0, 1.0, Neighbouring::Replace),
        "bounds"
    ));
    assert!(is_parameter_error(
        Sensitivity::bounded_mean(0.0, 1.0, 0),
        "n"
    ));
    assert!(is_parameter_error(
        Sensitivity::histogram(0),
        "cells per person"
    ));
}

#[test]
fn bad_values_get_errors_that_do_not_echo_them() {
    let laplace = Laplace::new(1.0, 1.0).unwrap();
    assert_eq!(laplace.privatize(f64::NAN), Err(Error::NonFiniteValue));
    assert_eq!(laplace.privatize(f64::INFINITY), Err(Error::NonFiniteValue));
    let secret = 3.141_592_653e300;
    let error = laplace.privatize(secret).unwrap_err();
    assert_eq!(error, Error::ValueOutOfRange);
    assert!(!error.to_string().contains("3.14"));
    // A bad value in a batch leaves the whole batch untouched.
    let mut batch = [1.0, 2.0, f64::NAN, 4.0];
    assert!(laplace.privatize_slice(&mut batch).is_err());
    assert_eq!(&batch[..2], &[1.0, 2.0]);
    let staircase = Staircase::new(1.0, 1.0).unwrap();
    assert_eq!(
        staircase.privatize(f64::NEG_INFINITY),
        Err(Error::NonFiniteValue)
    );
    let exponential = ExponentialMechanism::new(1.0, 1.0).unwrap();
    assert_eq!(exponential.select(&[]), Err(Error::EmptyCandidates));
    assert_eq!(
        exponential.select(&[1.0, f64::NAN]),
        Err(Error::NonFiniteValue)
    );
    let rnm = ReportNoisyMax::new(1.0, 1.0).unwrap();
    assert_eq!(rnm.select(&[]), Err(Error::EmptyCandidates));
    let krr = KaryRandomizedResponse::new(1.0, 3).unwrap();
    assert_eq!(krr.privatize(3), Err(Error::ValueOutOfRange));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any valid parameters build a mechanism whose proven realised loss is
    /// at most, and within 10⁻⁵ of, the declared ε.
    #[test]
    fn valid_parameters_build_mechanisms_that_keep_their_epsilon(
        epsilon in 0.01f64..15.0,
        sensitivity in 0.001f64..1e6,
        integer_sensitivity in 1u64..1000,
        gamma in 0.0f64..=1.0,
    ) {
        let laplace = Laplace::new(epsilon, sensitivity).unwrap();
        prop_assert!(laplace.realised_epsilon_bound() <= epsilon);
        prop_assert!(laplace.realised_epsilon_bound() >= epsilon * (1.0 - 1e-5));
        let staircase = Staircase::with_gamma(epsilon, sensitivity, StaircaseGamma::Value(gamma)).unwrap();
        prop_assert!(staircase.realised_epsilon_bound() <= epsilon);
        let geometric = TwoSidedGeometric::new(epsilon, integer_sensitivity).unwrap();
        prop_assert!(geometric.realised_epsilon_bound() <= epsilon);
        prop_assert!(geometric.realised_epsilon_bound() >= epsilon * (1.0 - 1e-5));
        let discrete = DiscreteStaircase::new(epsilon, integer_sensitivity).unwrap();
        prop_assert!(discrete.realised_epsilon_bound() <= epsilon);
        let bars = staircase.error_bars(0.05).unwrap();
        prop_assert!(bars.half_width.is_finite() && bars.half_width > 0.0);
        prop_assert!(laplace.privatize(sensitivity * 3.0).unwrap().is_finite());
    }

    #[test]
    fn gaussian_sigma_is_never_below_the_analytic_one(
        epsilon in 0.05f64..10.0,
        log_delta in -12.0f64..-2.0,
        sensitivity in 0.01f64..100.0,
    ) {
        let delta = 10f64.powf(log_delta);
        let gaussian = Gaussian::new(epsilon, delta, sensitivity).unwrap();
        prop_assert!(gaussian.sigma() >= gaussian.analytic_sigma());
        prop_assert!(gaussian.sigma() <= gaussian.analytic_sigma() * 1.02);
    }
}

/// Very large ε is valid input: every mechanism builds, keeps its proven
/// bound, and releases values close to the truth, with no panic.
#[test]
fn very_large_epsilon_builds_and_releases_near_the_truth() {
    use dpkit_core::mechanism::{IntegerMechanism, RealMechanism};
    let mut rng = dpkit_core::rng::InsecureSeededRng::from_seed_for_testing(99);
    for epsilon in [20.0, 50.0, 1e3, 1e6] {
        let laplace = Laplace::new(epsilon, 1.0).unwrap();
        assert!(laplace.realised_epsilon_bound() <= epsilon);
        let staircase = Staircase::new(epsilon, 99.0).unwrap();
        assert!(staircase.realised_epsilon_bound() <= epsilon);
        let l2 = Staircase::with_gamma(epsilon, 99.0, StaircaseGamma::L2Optimal).unwrap();
        let geometric = TwoSidedGeometric::new(epsilon, 1).unwrap();
        assert!(geometric.realised_epsilon_bound() <= epsilon);
        let discrete = DiscreteStaircase::new(epsilon, 5).unwrap();
        for _ in 0..2000 {
            assert!((laplace.privatize_with_rng(3.25, &mut rng).unwrap() - 3.25).abs() < 0.5);
            // The staircase keeps its central step at large ε: the error stays
            // far below Δ = 99, instead of spreading over ±Δ.
            assert!((staircase.privatize_with_rng(3.25, &mut rng).unwrap() - 3.25).abs() < 10.0);
            assert!((l2.privatize_with_rng(3.25, &mut rng).unwrap() - 3.25).abs() < 10.0);
            assert!((geometric.privatize_with_rng(3, &mut rng) - 3).abs() <= 1);
            assert!((discrete.privatize_with_rng(3, &mut rng) - 3).abs() <= 5);
        }
        assert!(staircase.expected_absolute_error() < 1.0, "ε = {epsilon}");
    }
}

/// Runs `build` on its own thread and fails the test if it has not finished
/// within `seconds`, so that a calibration that never ends fails here instead
/// of hanging the test run. Returns what `build` returned.
fn finishes_within<T: Send + 'static>(
    seconds: u64,
    what: String,
    build: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(build());
    });
    match receiver.recv_timeout(std::time::Duration::from_secs(seconds)) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {seconds} s")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// ε and δ at and near the edges of what the Gaussian mechanisms accept.
const EXTREME_EPSILON_DELTA: [(f64, f64); 7] = [
    (1.0, 1e-6),
    (1e-300, 1e-6),
    (f64::MIN_POSITIVE, 1e-6),
    (5e-324, 1e-100),
    (500.0, 1e-100),
    (500.0, 1.0 - 1e-16),
    (1e-3, 1e-100),
];

/// A built mechanism must have a finite positive σ and keep its declared ε;
/// a refusal must be a typed parameter error.
fn check_gaussian_outcome(sigma: dpkit_core::Result<(f64, f64)>, epsilon: f64, what: &str) {
    match sigma {
        Ok((sigma, declared)) => {
            assert!(sigma.is_finite() && sigma > 0.0, "{what}: σ = {sigma}");
            assert!(declared <= epsilon, "{what}: declared ε = {declared}");
        }
        Err(error) => assert!(
            matches!(error, Error::InvalidParameter { .. }),
            "{what}: {error}"
        ),
    }
}

#[test]
fn gaussian_calibration_ends_for_any_finite_sensitivity_and_epsilon() {
    let sensitivities = [
        1e308,
        f64::MAX,
        1e300,
        1e-300,
        f64::MIN_POSITIVE,
        5e-324,
        3.0,
    ];
    for sensitivity in sensitivities {
        for (epsilon, delta) in EXTREME_EPSILON_DELTA {
            let what = format!("Gaussian::new({epsilon:e}, {delta:e}, {sensitivity:e})");
            let outcome = finishes_within(10, what.clone(), move || {
                let mut rng = dpkit_core::rng::InsecureSeededRng::from_seed_for_testing(3);
                let gaussian = Gaussian::new(epsilon, delta, sensitivity)?;
                gaussian.privatize_with_rng(0.0, &mut rng)?;
                Ok((gaussian.sigma(), gaussian.privacy().epsilon()))
            });
            check_gaussian_outcome(outcome, epsilon, &what);
            let what = format!("analytic_gaussian_sigma({epsilon:e}, {delta:e}, {sensitivity:e})");
            let outcome = finishes_within(10, what.clone(), move || {
                analytic_gaussian_sigma(epsilon, delta, sensitivity).map(|sigma| (sigma, 0.0))
            });
            check_gaussian_outcome(outcome, epsilon, &what);
        }
    }
}

#[test]
fn discrete_gaussian_calibration_ends_for_any_sensitivity_and_epsilon() {
    use dpkit_core::mechanism::IntegerMechanism;
    for sensitivity in [1, 3, 1 << 53, u64::MAX] {
        for (epsilon, delta) in EXTREME_EPSILON_DELTA {
            let what = format!("DiscreteGaussian::new({epsilon:e}, {delta:e}, {sensitivity})");
            let outcome = finishes_within(10, what.clone(), move || {
                let mut rng = dpkit_core::rng::InsecureSeededRng::from_seed_for_testing(4);
                let gaussian = DiscreteGaussian::new(epsilon, delta, sensitivity)?;
                gaussian.privatize_with_rng(0, &mut rng);
                Ok((gaussian.sigma(), gaussian.privacy().epsilon()))
            });
            check_gaussian_outcome(outcome, epsilon, &what);
        }
    }
}
