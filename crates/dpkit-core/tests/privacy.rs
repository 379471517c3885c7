//! Privacy tests: neighbouring inputs reach the same outputs, and no output
//! event's probability ratio provably exceeds e^ε. The same checks catch a
//! naive floating-point Laplace and a Laplace with half its scale.

mod support;

use dpkit_core::mechanism::{
    BinaryRandomizedResponse, DiscreteStaircase, ExponentialMechanism, Gaussian, IntegerMechanism,
    KaryRandomizedResponse, Laplace, RealMechanism, ReportNoisyMax, Staircase, StaircaseGamma,
    TwoSidedGeometric,
};
use dpkit_core::rng::InsecureSeededRng;
use support::naive_laplace::NaiveFloatLaplace;
use support::privacy_check::proven_epsilon_lower_bound;
use support::stats::binomial_bounds;

const SAMPLES: usize = 200_000;

fn releases(mechanism: &impl RealMechanism, value: f64, seed: u64) -> Vec<f64> {
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let mut out = vec![value; SAMPLES];
    mechanism
        .privatize_slice_with_rng(&mut out, &mut rng)
        .unwrap();
    out
}

fn all_on_grid(values: &[f64], spacing: f64) -> bool {
    values.iter().all(|x| (x / spacing).fract() == 0.0)
}

/// Could the naive mechanism at `value` have produced `output`? Searches every
/// 53-bit uniform whose noise lands on `output` (noise is monotone in u).
fn naive_can_produce(naive: &NaiveFloatLaplace, value: f64, output: f64) -> bool {
    let target = output - value;
    let u = if target < 0.0 {
        (target / naive.scale).exp() / 2.0
    } else {
        1.0 - (-target / naive.scale).exp() / 2.0
    };
    let centre = (u * 9_007_199_254_740_992.0) as i64;
    let produces = |k: i64| {
        (1..(1i64 << 53)).contains(&k)
            && value + naive.noise_from_uniform(NaiveFloatLaplace::uniform_from(k as u64)) == output
    };
    let landing = |k: i64| {
        value
            + naive.noise_from_uniform(NaiveFloatLaplace::uniform_from(
                k.clamp(1, (1 << 53) - 1) as u64
            ))
    };
    // Walk outwards while the outputs still equal or straddle the target.
    let mut k = centre;
    while k > 1 && landing(k) >= output {
        if produces(k) {
            return true;
        }
        k -= 1;
    }
    let mut k = centre + 1;
    while k < (1 << 53) - 1 && landing(k) <= output {
        if produces(k) {
            return true;
        }
        k += 1;
    }
    produces(k) || produces(centre)
}

#[test]
fn naive_float_laplace_leaks_through_its_reachable_outputs() {
    let naive = NaiveFloatLaplace { scale: 1.0 };
    let mut rng = InsecureSeededRng::from_seed_for_testing(1);
    let (value, neighbour) = (0.0, 1.0);
    let outputs: Vec<f64> = (0..2_000)
        .map(|_| naive.privatize(value, &mut rng))
        .collect();
    assert!(
        outputs.iter().all(|&x| naive_can_produce(&naive, value, x)),
        "the search finds the true source"
    );
    let unreachable = outputs
        .iter()
        .filter(|&&x| !naive_can_produce(&naive, neighbour, x))
        .count();
    // Mironov 2012: many outputs of q = 0 cannot come from q = 1 at all, so
    // seeing one reveals the input with certainty.
    assert!(
        unreachable > 200,
        "only {unreachable} of 2000 outputs were unreachable from the neighbour"
    );
}

#[test]
fn lattice_mechanisms_reach_the_same_outputs_from_neighbouring_inputs() {
    // Every output is a grid point; the noise takes every integer value, so
    // every grid point is reachable from every input. The naive mechanism's
    // outputs are not confined to any grid.
    let laplace = Laplace::new(1.0, 1.0).unwrap();
    let staircase = Staircase::new(1.0, 1.0).unwrap();
    let gaussian = Gaussian::new(1.0, 1e-6, 1.0).unwrap();
    for (q, neighbour) in [(0.0, 1.0), (0.3, 1.3), (-1234.56789, -1233.56789)] {
        assert!(all_on_grid(
            &releases(&laplace, q, 10),
            laplace.lattice().spacing()
        ));
        assert!(all_on_grid(
            &releases(&laplace, neighbour, 11),
            laplace.lattice().spacing()
        ));
        assert!(all_on_grid(
            &releases(&staircase, q, 12),
            staircase.lattice().spacing()
        ));
        assert!(all_on_grid(
            &releases(&staircase, neighbour, 13),
            staircase.lattice().spacing()
        ));
        assert!(all_on_grid(
            &releases(&gaussian, q, 14),
            gaussian.lattice().spacing()
        ));
        assert!(all_on_grid(
            &releases(&gaussian, neighbour, 15),
            gaussian.lattice().spacing()
        ));
    }
    let naive = NaiveFloatLaplace { scale: 1.0 };
    let mut rng = InsecureSeededRng::from_seed_for_testing(16);
    let naive_outputs: Vec<f64> = (0..1000).map(|_| naive.privatize(0.3, &mut rng)).collect();
    assert!(!all_on_grid(&naive_outputs, laplace.lattice().spacing()));
}

#[test]
fn no_output_event_of_a_real_mechanism_exceeds_e_to_the_epsilon() {
    let epsilon = 1.0;
    let laplace = Laplace::new(epsilon, 1.0).unwrap();
    let staircase = Staircase::new(epsilon, 1.0).unwrap();
    let staircase_l2 = Staircase::with_gamma(epsilon, 1.0, StaircaseGamma::L2Optimal).unwrap();
    let bound =
        proven_epsilon_lower_bound(&releases(&laplace, 5.0, 20), &releases(&laplace, 6.0, 21));
    assert!(
        bound <= epsilon,
        "Laplace: samples prove ε ≥ {bound} > {epsilon}"
    );
    let bound = proven_epsilon_lower_bound(
        &releases(&staircase, 5.0, 24),
        &releases(&staircase, 6.0, 25),
    );
    assert!(
        bound <= epsilon,
        "staircase: samples prove ε ≥ {bound} > {epsilon}"
    );
    let bound = proven_epsilon_lower_bound(
        &releases(&staircase_l2, 5.0, 26),
        &releases(&staircase_l2, 6.0, 27),
    );
    assert!(
        bound <= epsilon,
        "staircase L2: samples prove ε ≥ {bound} > {epsilon}"
    );
    // The Gaussian is (ε, δ): an event may reach e^ε·P' + δ. The thresholds'
    // events have probability ≥ 1e-5, so δ = 1e-6 adds at most ln(1 + 0.1/e)
    // ≈ 0.036 to the ratio an event can show.
    let gaussian = Gaussian::new(epsilon, 1e-6, 1.0).unwrap();
    let bound =
        proven_epsilon_lower_bound(&releases(&gaussian, 5.0, 22), &releases(&gaussian, 6.0, 23));
    assert!(
        bound <= epsilon + 0.05,
        "Gaussian: samples prove ε ≥ {bound}"
    );
}

#[test]
fn the_event_check_catches_a_laplace_with_half_its_scale() {
    // Declared ε = 1 but built with twice the ε: half the noise.
    let broken = Laplace::new(2.0, 1.0).unwrap();
    let bound =
        proven_epsilon_lower_bound(&releases(&broken, 5.0, 30), &releases(&broken, 6.0, 31));
    assert!(
        bound > 1.0,
        "the check should prove ε > 1, proved only {bound}"
    );
}

fn integer_releases(mechanism: &impl IntegerMechanism, value: i64, seed: u64) -> Vec<f64> {
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let mut out = vec![value; SAMPLES];
    mechanism.privatize_slice_with_rng(&mut out, &mut rng);
    out.into_iter().map(|v| v as f64).collect()
}

#[test]
fn no_output_event_of_an_integer_mechanism_exceeds_e_to_the_epsilon() {
    let geometric = TwoSidedGeometric::new(1.0, 1).unwrap();
    let bound = proven_epsilon_lower_bound(
        &integer_releases(&geometric, 10, 40),
        &integer_releases(&geometric, 11, 41),
    );
    assert!(bound <= 1.0, "geometric: {bound}");
    let staircase = DiscreteStaircase::new(1.0, 5).unwrap();
    let bound = proven_epsilon_lower_bound(
        &integer_releases(&staircase, 10, 42),
        &integer_releases(&staircase, 15, 43),
    );
    assert!(bound <= 1.0, "discrete staircase: {bound}");
    // Single output values, not only thresholds: every common value's ratio.
    let a = integer_releases(&geometric, 0, 44);
    let b = integer_releases(&geometric, 1, 45);
    for k in -6..=7 {
        let count = |v: &[f64]| v.iter().filter(|&&x| x == k as f64).count() as u64;
        let (low_a, high_a) = binomial_bounds(count(&a), SAMPLES as u64);
        let (low_b, high_b) = binomial_bounds(count(&b), SAMPLES as u64);
        assert!(
            low_a / high_b <= 1f64.exp() && low_b / high_a <= 1f64.exp(),
            "output {k}"
        );
    }
}

/// Asserts the observed frequencies of each category under two inputs never
/// prove a ratio above e^ε.
fn assert_categorical_ratio(label: &str, first: &[u64], second: &[u64], epsilon: f64) {
    let (n_a, n_b) = (first.iter().sum::<u64>(), second.iter().sum::<u64>());
    for (category, (&a, &b)) in first.iter().zip(second).enumerate() {
        let (low_a, high_a) = binomial_bounds(a, n_a);
        let (low_b, high_b) = binomial_bounds(b, n_b);
        let proven = (low_a / high_b).max(low_b / high_a).ln();
        assert!(
            proven <= epsilon,
            "{label} output {category}: samples prove ε ≥ {proven} > {epsilon}"
        );
    }
}

#[test]
fn categorical_mechanisms_keep_their_ratio() {
    let mut rng = InsecureSeededRng::from_seed_for_testing(50);
    for p in [0.5, 0.8, 0.2] {
        let rr = BinaryRandomizedResponse::new(p).unwrap();
        let tally = |truth: bool, rng: &mut InsecureSeededRng| {
            let yes = (0..SAMPLES)
                .filter(|_| rr.privatize_with_rng(truth, rng))
                .count() as u64;
            [yes, SAMPLES as u64 - yes]
        };
        let (a, b) = (tally(false, &mut rng), tally(true, &mut rng));
        assert_categorical_ratio(&format!("RR p={p}"), &a, &b, rr.privacy().epsilon());
    }
    let krr = KaryRandomizedResponse::new(1.0, 4).unwrap();
    let tally = |truth: u64, rng: &mut InsecureSeededRng| {
        let mut counts = vec![0u64; 4];
        for _ in 0..SAMPLES {
            counts[krr.privatize_with_rng(truth, rng).unwrap() as usize] += 1;
        }
        counts
    };
    let (a, b) = (tally(0, &mut rng), tally(1, &mut rng));
    assert_categorical_ratio("k-RR", &a, &b, 1.0);

    // Exponential mechanism and report-noisy-max: utilities of neighbours
    // differ by at most Δu = 1 in each candidate.
    let (u, u_neighbour) = ([4.0, 3.0, 3.5, 0.0], [3.0, 4.0, 3.5, 1.0]);
    let exponential = ExponentialMechanism::new(1.0, 1.0).unwrap();
    let rnm = ReportNoisyMax::new(1.0, 1.0).unwrap();
    let mut counts = |select: &dyn Fn(&[f64], &mut InsecureSeededRng) -> usize,
                      utilities: &[f64]| {
        let mut counts = vec![0u64; 4];
        for _ in 0..SAMPLES {
            counts[select(utilities, &mut rng)] += 1;
        }
        counts
    };
    let select = |utilities: &[f64], rng: &mut InsecureSeededRng| {
        exponential.select_with_rng(utilities, rng).unwrap()
    };
    let (a, b) = (counts(&select, &u), counts(&select, &u_neighbour));
    assert_categorical_ratio("exponential", &a, &b, 1.0);
    let select = |utilities: &[f64], rng: &mut InsecureSeededRng| {
        rnm.select_with_rng(utilities, rng).unwrap()
    };
    let (a, b) = (counts(&select, &u), counts(&select, &u_neighbour));
    assert_categorical_ratio("report-noisy-max", &a, &b, 1.0);
}
