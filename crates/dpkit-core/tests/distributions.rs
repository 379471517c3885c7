//! Every mechanism's samples against its closed-form distribution: KS (DKW
//! bound) on the noise, E|X|, variance; categorical mechanisms by frequency.

mod support;

use dpkit_core::accuracy::NoiseAccuracy;
use dpkit_core::mechanism::{
    BinaryRandomizedResponse, DiscreteGaussian, DiscreteStaircase, ExponentialMechanism, Gaussian,
    IntegerMechanism, KaryRandomizedResponse, Laplace, RealMechanism, Staircase, StaircaseGamma,
    TwoSidedGeometric,
};
use dpkit_core::rng::InsecureSeededRng;
use dpkit_core::sampling::{DiscreteGaussianSampler, TwoSidedGeometricSampler};
use support::stats::{assert_frequency, assert_ks_integer, assert_moments};

const SAMPLES: usize = 200_000;

fn two_sided_geometric_cdf(noise: &TwoSidedGeometricSampler) -> impl Fn(i64) -> f64 + '_ {
    move |k| {
        let alpha = noise.ratio();
        let s = noise.unit_log_ratio();
        if k >= 0 {
            1.0 - (-(k as f64 + 1.0) * s).exp() / (1.0 + alpha)
        } else {
            (k as f64 * s).exp() / (1.0 + alpha)
        }
    }
}

fn symmetric_cdf_from_tail(tail: impl Fn(u64) -> f64) -> impl Fn(i64) -> f64 {
    move |k| {
        if k >= 0 {
            1.0 - tail(k as u64) / 2.0
        } else {
            tail((-k - 1) as u64) / 2.0
        }
    }
}

/// Releases `value` many times and returns the noise in grid steps.
fn lattice_noise_steps(
    mechanism: &impl RealMechanism,
    spacing: f64,
    value: f64,
    seed: u64,
) -> Vec<i64> {
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let centre = (value / spacing).round();
    let mut released = vec![value; SAMPLES];
    mechanism
        .privatize_slice_with_rng(&mut released, &mut rng)
        .unwrap();
    released
        .iter()
        .map(|x| {
            let steps = x / spacing - centre;
            assert_eq!(steps.fract(), 0.0, "every output lies on the grid");
            steps as i64
        })
        .collect()
}

#[test]
fn two_sided_geometric_matches_its_pmf_and_moments() {
    for (seed, &(epsilon, sensitivity)) in [(0.1, 1u64), (1.0, 1), (3.0, 1), (1.0, 4), (12.0, 1)]
        .iter()
        .enumerate()
    {
        let mechanism = TwoSidedGeometric::new(epsilon, sensitivity).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(100 + seed as u64);
        let mut values = vec![0i64; SAMPLES];
        mechanism.privatize_slice_with_rng(&mut values, &mut rng);
        let label = format!("geometric ε={epsilon} Δ={sensitivity}");
        assert_ks_integer(&label, &values, two_sided_geometric_cdf(mechanism.noise()));
        let noise: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        assert_moments(
            &label,
            &noise,
            mechanism.expected_absolute_error(),
            mechanism.variance(),
        );
        // The closed form is the reference's: E|Z| = 2α/(1 − α²), α = e^(−ε/Δ).
        let alpha = (-epsilon / sensitivity as f64).exp();
        let reference = 2.0 * alpha / (1.0 - alpha * alpha);
        // within the 10⁻⁶ relative calibration margin on ε
        assert!(
            (mechanism.expected_absolute_error() / reference - 1.0).abs() < 2e-6 * epsilon.max(1.0)
        );
    }
}

/// The tails, side by side: for thresholds `t` where `P(|Z| > t)` is about
/// 5%, 1.5% (where the samplers' tables hand over to their tail samplers)
/// and 0.2%, the frequencies of `Z > t` and `Z < −t` each match half of it.
fn assert_tails(label: &str, samples: &[i64], tail: impl Fn(u64) -> f64) {
    for share in [0.05, 0.015, 0.002] {
        let (mut low, mut high) = (0u64, 1u64);
        while tail(high) > share {
            high *= 2;
        }
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if tail(middle) > share {
                low = middle;
            } else {
                high = middle;
            }
        }
        let t = high as i64;
        let trials = samples.len() as u64;
        let above = samples.iter().filter(|&&z| z > t).count() as u64;
        let below = samples.iter().filter(|&&z| z < -t).count() as u64;
        let half = tail(high) / 2.0;
        assert_frequency(&format!("{label} P(Z > {t})"), above, trials, half);
        assert_frequency(&format!("{label} P(Z < -{t})"), below, trials, half);
    }
}

/// Each sampling strategy (one table, block and offset tables, sign and
/// magnitude) realises the discrete Laplace, tails included.
#[test]
fn two_sided_geometric_sampler_is_exact_in_every_strategy() {
    // Direct tables of 2^4, 2^8 and 2^14 cells; blocked in each layout (one
    // offset table of 2^12 or 2^14 cells, the latter with block tables of
    // 2^12 and 2^16 cells; two of 2^24 or 2^26);
    // sign-magnitude; each drawn one at a time and a block at a time.
    let cases = [0.9, 0.05, 1e-3, 3e-4, 2e-7, 1e-8, 3e-9, 3e-11, 1e-13];
    for (seed, (&s, batch)) in cases
        .iter()
        .flat_map(|s| [(s, false), (s, true)])
        .enumerate()
    {
        let noise = TwoSidedGeometricSampler::new(s).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(150 + seed as u64);
        // An odd batch also takes the last value's half-word path.
        let mut samples = vec![0i64; SAMPLES - usize::from(batch)];
        if batch {
            noise.sample_into(&mut samples, &mut rng);
        } else {
            samples.fill_with(|| noise.sample(&mut rng));
        }
        let label = format!("two-sided geometric s={s} batch={batch}");
        assert_ks_integer(&label, &samples, two_sided_geometric_cdf(&noise));
        assert_tails(&label, &samples, |t| noise.tail_probability(t));
        let values: Vec<f64> = samples.iter().map(|&z| z as f64).collect();
        assert_moments(
            &label,
            &values,
            noise.expected_absolute_value(),
            noise.variance(),
        );
    }
}

#[test]
fn laplace_matches_the_discrete_laplace_on_its_grid_and_the_laplace_moments() {
    for (seed, &(epsilon, sensitivity)) in [(0.05, 1.0), (1.0, 1.0), (1.0, 0.3), (8.0, 2.5)]
        .iter()
        .enumerate()
    {
        let mechanism = Laplace::new(epsilon, sensitivity).unwrap();
        let spacing = mechanism.lattice().spacing();
        let steps = lattice_noise_steps(&mechanism, spacing, 17.123, 200 + seed as u64);
        let label = format!("Laplace ε={epsilon} Δ={sensitivity}");
        assert_ks_integer(&label, &steps, two_sided_geometric_cdf(mechanism.noise()));
        let noise: Vec<f64> = steps.iter().map(|&k| k as f64 * spacing).collect();
        assert_moments(
            &label,
            &noise,
            mechanism.expected_absolute_error(),
            mechanism.variance(),
        );
        // Within 0.2% of the continuous Laplace: E|X| = λ, Var = 2λ².
        let scale = sensitivity / epsilon;
        assert!((mechanism.expected_absolute_error() / scale - 1.0).abs() < 2e-3);
        assert!((mechanism.variance() / (2.0 * scale * scale) - 1.0).abs() < 4e-3);
    }
}

#[test]
fn staircase_closed_forms_match_the_reference_table() {
    // Reference §Staircase: E|X| with the L1-optimal γ, Δ = 1.
    for &(epsilon, expected) in &[
        (0.1, 9.9958),
        (1.0, 0.95952),
        (2.0, 0.42546),
        (4.0, 0.13786),
        (8.0, 0.018322),
    ] {
        let staircase = Staircase::new(epsilon, 1.0).unwrap();
        let relative = (staircase.expected_absolute_error() / expected - 1.0).abs();
        assert!(
            relative < 5e-5,
            "ε={epsilon}: {} vs {expected}",
            staircase.expected_absolute_error()
        );
        // and the floor Δ/(2 sinh(ε/2))
        let floor = 1.0 / (2.0 * (epsilon / 2.0).sinh());
        assert!((staircase.expected_absolute_error() / floor - 1.0).abs() < 1e-5);
    }
}

/// The reference's continuous closed forms for E|X| and E[X²] (Δ = 1).
fn continuous_staircase_moments(epsilon: f64, gamma: f64) -> (f64, f64) {
    let b = (-epsilon).exp();
    let d = gamma + (1.0 - gamma) * b;
    let abs = b / (1.0 - b) + (gamma * gamma + b * (1.0 - gamma * gamma)) / (2.0 * d);
    let second = b * (1.0 + b) / (1.0 - b).powi(2)
        + b * (gamma * gamma + b * (1.0 - gamma * gamma)) / ((1.0 - b) * d)
        + (gamma.powi(3) + b * (1.0 - gamma.powi(3))) / (3.0 * d);
    (abs, second)
}

#[test]
fn staircase_matches_its_distribution_for_every_gamma() {
    let cases = [
        (0.5, StaircaseGamma::L1Optimal),
        (2.0, StaircaseGamma::L1Optimal),
        (2.0, StaircaseGamma::L2Optimal),
        (6.0, StaircaseGamma::Value(0.3)),
        (1.0, StaircaseGamma::Value(1.0)),
        (1.0, StaircaseGamma::Value(0.0)),
        // Below ε ≈ 0.004 the staircase samples without its cell table.
        (0.002, StaircaseGamma::L1Optimal),
    ];
    for (seed, &(epsilon, gamma)) in cases.iter().enumerate() {
        let mechanism = Staircase::with_gamma(epsilon, 1.0, gamma).unwrap();
        let (abs, second) = continuous_staircase_moments(epsilon, mechanism.gamma());
        let label = format!("staircase ε={epsilon} {gamma:?}");
        assert!(
            (mechanism.expected_absolute_error() / abs - 1.0).abs() < 1e-5,
            "{label} E|X| closed form"
        );
        assert!(
            (mechanism.variance() / second - 1.0).abs() < 1e-5,
            "{label} variance closed form"
        );
        let spacing = mechanism.lattice().spacing();
        let steps = lattice_noise_steps(&mechanism, spacing, -3.7, 300 + seed as u64);
        assert_ks_integer(
            &label,
            &steps,
            symmetric_cdf_from_tail(|t| mechanism.tail_probability_of_steps(t)),
        );
        assert_tails(&label, &steps, |t| mechanism.tail_probability_of_steps(t));
        let noise: Vec<f64> = steps.iter().map(|&k| k as f64 * spacing).collect();
        assert_moments(&label, &noise, abs, second);
    }
}

#[test]
fn l2_optimal_gamma_has_the_least_variance() {
    for &epsilon in &[0.5, 1.0, 3.0, 8.0] {
        let best = Staircase::with_gamma(epsilon, 1.0, StaircaseGamma::L2Optimal).unwrap();
        for &other in &[0.05, 0.2, 0.5, 0.8] {
            let candidate =
                Staircase::with_gamma(epsilon, 1.0, StaircaseGamma::Value(other)).unwrap();
            assert!(best.variance() <= candidate.variance() * (1.0 + 1e-9));
        }
    }
}

#[test]
fn discrete_staircase_matches_its_pmf() {
    for (seed, &(epsilon, sensitivity)) in [(1.0, 5u64), (3.0, 10), (0.5, 2), (1.0, 1)]
        .iter()
        .enumerate()
    {
        let mechanism = DiscreteStaircase::new(epsilon, sensitivity).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(400 + seed as u64);
        let mut values = vec![0i64; SAMPLES];
        mechanism.privatize_slice_with_rng(&mut values, &mut rng);
        let label = format!(
            "discrete staircase ε={epsilon} Δ={sensitivity} r={}",
            mechanism.rise()
        );
        // The tail closed form agrees with summing the pmf.
        let summed: f64 = (-2000..=2000)
            .map(|k| mechanism.probability_of_noise(k))
            .sum();
        assert!((summed - 1.0).abs() < 1e-9, "{label}: pmf sums to {summed}");
        assert_ks_integer(
            &label,
            &values,
            symmetric_cdf_from_tail(|t| mechanism.tail_probability(t)),
        );
        assert_tails(&label, &values, |t| mechanism.tail_probability(t));
        let noise: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        assert_moments(
            &label,
            &noise,
            mechanism.expected_absolute_error(),
            mechanism.variance(),
        );
    }
    // Δ = 1 is the two-sided geometric.
    let staircase = DiscreteStaircase::new(1.0, 1).unwrap();
    let geometric = TwoSidedGeometric::new(1.0, 1).unwrap();
    assert!(
        (staircase.expected_absolute_error() / geometric.expected_absolute_error() - 1.0).abs()
            < 1e-9
    );
}

fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

#[test]
fn gaussian_matches_the_discrete_gaussian() {
    for (seed, &(epsilon, delta)) in [(1.0, 1e-6), (0.2, 1e-9)].iter().enumerate() {
        let mechanism = Gaussian::new(epsilon, delta, 1.0).unwrap();
        let spacing = mechanism.lattice().spacing();
        let sigma_steps = mechanism.sigma() / spacing;
        assert!(mechanism.sigma() >= mechanism.analytic_sigma());
        assert!(mechanism.sigma() <= mechanism.analytic_sigma() * 1.01);
        let steps = lattice_noise_steps(&mechanism, spacing, 2.0, 500 + seed as u64);
        let label = format!("Gaussian ε={epsilon} δ={delta}");
        // σ ≥ 1024 steps: the discrete CDF equals Φ((k + ½)/σ) to ~1e-8.
        assert_ks_integer(&label, &steps, |k| {
            normal_cdf((k as f64 + 0.5) / sigma_steps)
        });
        let noise: Vec<f64> = steps.iter().map(|&k| k as f64 * spacing).collect();
        assert_moments(
            &label,
            &noise,
            mechanism.expected_absolute_error(),
            mechanism.variance(),
        );
    }
}

/// `P(Y ≤ k)` of the discrete Gaussian: summed exactly for small σ, and
/// `Φ((k + ½)/σ)` beyond σ = 100, where the two agree within 1e-5.
fn discrete_gaussian_cdf(sigma: f64) -> impl Fn(i64) -> f64 {
    let reach = (40.0 * sigma).ceil() as i64;
    let weight = move |y: i64| (-(y as f64).powi(2) / (2.0 * sigma * sigma)).exp();
    let normaliser: f64 = (-reach..=reach).map(weight).sum();
    move |k| {
        if sigma > 100.0 {
            normal_cdf((k as f64 + 0.5) / sigma)
        } else {
            (-reach..=k.min(reach)).map(weight).sum::<f64>() / normaliser
        }
    }
}

#[test]
fn discrete_gaussian_sampler_is_exact_in_every_strategy() {
    // Tables covering 6σ and more (tiny tails), 2.2σ (a 3% tail) and 1.56σ
    // (a 12% tail), and rejection beyond; one at a time and in blocks.
    let cases = [0.4, 3.0, 700.0, 15_000.0, 21_000.0, 30_000.0];
    for (seed, (&sigma, batch)) in cases
        .iter()
        .flat_map(|s| [(s, false), (s, true)])
        .enumerate()
    {
        let sampler = DiscreteGaussianSampler::new(sigma).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(700 + seed as u64);
        let mut samples = vec![0i64; SAMPLES - usize::from(batch)];
        if batch {
            sampler.sample_into(&mut samples, &mut rng);
        } else {
            samples.fill_with(|| sampler.sample(&mut rng));
        }
        let label = format!("discrete Gaussian σ={sigma} batch={batch}");
        let cdf = discrete_gaussian_cdf(sigma);
        assert_ks_integer(&label, &samples, &cdf);
        assert_tails(&label, &samples, |t| 2.0 * (1.0 - cdf(t as i64)));
        assert!(
            sampler.log_spread_bound() < 1e-9,
            "{label}: {}",
            sampler.log_spread_bound()
        );
    }
}

#[test]
fn discrete_gaussian_matches_its_exact_pmf() {
    let mechanism = DiscreteGaussian::new(2.0, 1e-3, 1).unwrap();
    let sigma = mechanism.sigma();
    let weight = |y: i64| (-(y as f64).powi(2) / (2.0 * sigma * sigma)).exp();
    let normaliser: f64 = (-400..=400).map(weight).sum();
    let cdf = |k: i64| (-400..=k.clamp(-401, 400)).map(weight).sum::<f64>() / normaliser;
    let mut rng = InsecureSeededRng::from_seed_for_testing(600);
    let mut values = vec![0i64; SAMPLES];
    mechanism.privatize_slice_with_rng(&mut values, &mut rng);
    assert_ks_integer("discrete Gaussian", &values, cdf);
    let exact_abs: f64 = (-400i64..=400)
        .map(|y| y.unsigned_abs() as f64 * weight(y))
        .sum::<f64>()
        / normaliser;
    let exact_var: f64 = (-400..=400)
        .map(|y| (y as f64).powi(2) * weight(y))
        .sum::<f64>()
        / normaliser;
    let noise: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    assert_moments("discrete Gaussian", &noise, exact_abs, exact_var);
}

#[test]
fn binary_randomized_response_reports_with_the_stated_probabilities() {
    for (seed, &p) in [0.5, 0.3, 0.8].iter().enumerate() {
        let mechanism = BinaryRandomizedResponse::new(p).unwrap();
        let mut rng = InsecureSeededRng::from_seed_for_testing(700 + seed as u64);
        for truth in [false, true] {
            let yes = (0..SAMPLES)
                .filter(|_| mechanism.privatize_with_rng(truth, &mut rng))
                .count() as u64;
            let expected = mechanism.probability_of_true_report(truth);
            assert_frequency(
                &format!("RR p={p} truth={truth}"),
                yes,
                SAMPLES as u64,
                expected,
            );
        }
        // ε is the larger of the two output ratios, computed from the coin.
        let one = mechanism.probability_of_true_report(true)
            / mechanism.probability_of_true_report(false);
        let zero = (1.0 - mechanism.probability_of_true_report(false))
            / (1.0 - mechanism.probability_of_true_report(true));
        assert!((mechanism.privacy().epsilon() - one.max(zero).ln()).abs() < 1e-12);
    }
    // Unfair coins: the two ratios differ, and ε is not the fair-coin ln 3.
    let unfair = BinaryRandomizedResponse::new(0.8).unwrap();
    // p = 0.8: P(0|0)/P(0|1) = (1 − p + p²)/(1 − p)² = 21 beats P(1|1)/P(1|0) = (2 − p)/(1 − p) = 6.
    assert!((unfair.privacy().epsilon() - 21f64.ln()).abs() < 1e-9);
}

#[test]
fn kary_randomized_response_reports_with_the_stated_probabilities() {
    let mechanism = KaryRandomizedResponse::new(1.5, 5).unwrap();
    let mut rng = InsecureSeededRng::from_seed_for_testing(800);
    let mut counts = [0u64; 5];
    for _ in 0..SAMPLES {
        counts[mechanism.privatize_with_rng(2, &mut rng).unwrap() as usize] += 1;
    }
    let keep = mechanism.probability_of_truth();
    assert!((keep - 1.5f64.exp() / (1.5f64.exp() + 4.0)).abs() < 1e-12);
    for (category, &count) in counts.iter().enumerate() {
        let expected = if category == 2 {
            keep
        } else {
            (1.0 - keep) / 4.0
        };
        assert_frequency(
            &format!("k-RR category {category}"),
            count,
            SAMPLES as u64,
            expected,
        );
    }
    let estimates = mechanism.estimate_frequencies(&counts).unwrap();
    assert!((estimates[2] - 1.0).abs() < 0.02);
}

#[test]
fn exponential_mechanism_selects_in_proportion_to_its_weights() {
    // Marital status counts of the Adult data: utilities in the tens of thousands.
    let utilities = [22_379.0, 16_117.0, 6_633.0, 1_530.0, 1_518.0, 628.0, 37.0];
    let sharp = ExponentialMechanism::new(1.0, 1.0).unwrap();
    let probabilities = sharp.selection_probabilities(&utilities).unwrap();
    assert!(probabilities.iter().all(|p| p.is_finite() && *p > 0.0));
    assert!(probabilities[0] > 0.999_999);
    // At small ε the realised probabilities match the ideal softmax.
    let utilities = [3.0, 2.0, 0.0, -1.0];
    let mechanism = ExponentialMechanism::new(0.8, 1.0).unwrap();
    let probabilities = mechanism.selection_probabilities(&utilities).unwrap();
    let weights: Vec<f64> = utilities.iter().map(|u| (0.8 * u / 2.0f64).exp()).collect();
    let total: f64 = weights.iter().sum();
    for (p, w) in probabilities.iter().zip(&weights) {
        assert!((p / (w / total) - 1.0).abs() < 1e-5);
    }
    let mut rng = InsecureSeededRng::from_seed_for_testing(900);
    let mut counts = [0u64; 4];
    for _ in 0..SAMPLES {
        counts[mechanism.select_with_rng(&utilities, &mut rng).unwrap()] += 1;
    }
    for (i, &count) in counts.iter().enumerate() {
        assert_frequency(
            &format!("exponential candidate {i}"),
            count,
            SAMPLES as u64,
            probabilities[i],
        );
    }
}

#[test]
fn confidence_half_widths_cover_the_stated_share() {
    let mut rng = InsecureSeededRng::from_seed_for_testing(1000);
    let laplace = Laplace::new(0.7, 1.0).unwrap();
    let staircase = Staircase::new(0.7, 1.0).unwrap();
    let gaussian = Gaussian::new(0.7, 1e-6, 1.0).unwrap();
    let geometric = TwoSidedGeometric::new(0.7, 1).unwrap();
    for alpha in [0.05, 0.2] {
        let check = |label: &str, half_width: f64, covered: u64| {
            // coverage ≥ 1 − α (the bound may be conservative, never short)
            let (_, upper) = support::stats::binomial_bounds(covered, SAMPLES as u64);
            assert!(
                upper >= 1.0 - alpha,
                "{label}: coverage {covered}/{SAMPLES} below {}",
                1.0 - alpha
            );
            assert!(half_width > 0.0);
        };
        let truth = 0.123;
        let h = laplace.confidence_half_width(alpha).unwrap();
        let covered = (0..SAMPLES)
            .filter(|_| (laplace.privatize_with_rng(truth, &mut rng).unwrap() - truth).abs() <= h)
            .count();
        check("Laplace", h, covered as u64);
        let h = staircase.confidence_half_width(alpha).unwrap();
        let covered = (0..SAMPLES)
            .filter(|_| (staircase.privatize_with_rng(truth, &mut rng).unwrap() - truth).abs() <= h)
            .count();
        check("staircase", h, covered as u64);
        let h = gaussian.confidence_half_width(alpha).unwrap();
        let covered = (0..SAMPLES)
            .filter(|_| (gaussian.privatize_with_rng(truth, &mut rng).unwrap() - truth).abs() <= h)
            .count();
        check("Gaussian", h, covered as u64);
        let h = geometric.confidence_half_width(alpha).unwrap();
        let covered = (0..SAMPLES)
            .filter(|_| ((geometric.privatize_with_rng(40, &mut rng) - 40) as f64).abs() <= h)
            .count();
        check("geometric", h, covered as u64);
        // and the interval is tight: the continuous Laplace quantile λ·ln(1/α)
        let tight =
            laplace.confidence_half_width(alpha).unwrap() / ((1.0 / 0.7) * (1.0 / alpha).ln());
        assert!(
            (tight - 1.0).abs() < 0.01,
            "Laplace half-width {tight}× the continuous one"
        );
    }
}
