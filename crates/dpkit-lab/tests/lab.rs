//! Every experiment in quick mode: the files it writes are valid and its
//! numbers agree with their closed forms.

use std::path::{Path, PathBuf};

use dpkit_lab::experiments::densities::{gaussian_density, laplace_density, staircase_density};
use dpkit_lab::experiments::mean_height::typical_sensitivity_closed_form;
use dpkit_lab::{Experiment, LabSettings, run};

/// Runs one experiment in quick mode into a fresh folder.
fn run_quick(experiment: Experiment) -> PathBuf {
    let output = std::env::temp_dir().join(format!(
        "dpkit-lab-test-{}-{}",
        experiment.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&output);
    let settings = LabSettings {
        output: output.clone(),
        data: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult"),
        seed: Some(20_261_122),
        quick: true,
    };
    let sections = run(&[experiment], &settings).unwrap();
    let report = std::fs::read_to_string(output.join("report.md")).unwrap();
    for section in &sections {
        assert!(report.contains(&section.title));
        for (png, _) in &section.figures {
            assert!(report.contains(png.as_str()), "report links {png}");
            assert_valid_figure(&output, png);
        }
        for csv in &section.csv_files {
            assert!(rows(&output, csv).len() > 1, "{csv} has rows");
        }
    }
    output
}

fn assert_valid_figure(folder: &Path, png: &str) {
    let bytes = std::fs::read(folder.join(png)).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{png} is a PNG");
    let svg = std::fs::read_to_string(folder.join(png.replace(".png", ".svg"))).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{png}: SVG"
    );
}

/// CSV rows as maps from header to field.
fn rows(folder: &Path, file: &str) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(folder.join(file)).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|line| {
            header
                .iter()
                .zip(line.split(','))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn number(row: &std::collections::HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} is a number"))
}

#[test]
fn speed_times_every_mechanism_on_both_generators() {
    let folder = run_quick(Experiment::Speed);
    let rows = rows(&folder, "speed.csv");
    assert_eq!(rows.len(), 12 * 4);
    assert!(
        rows.iter()
            .any(|r| r["mechanism"].starts_with("naive f64 Laplace"))
    );
    for row in &rows {
        let (median, min, max) = (
            number(row, "median_ns"),
            number(row, "min_ns"),
            number(row, "max_ns"),
        );
        assert!(0.0 < min && min <= median && median <= max, "{row:?}");
    }
}

#[test]
fn measured_accuracy_agrees_with_the_closed_forms() {
    let folder = run_quick(Experiment::Accuracy);
    let rows = rows(&folder, "accuracy.csv");
    assert_eq!(rows.len(), 5 * 10, "5 mechanisms × (5 grid + 5 named ε)");
    for row in &rows {
        // At large ε rare tail values decide the sample moments and the
        // normal approximation fails; up to ε = 4 every estimate rests on
        // hundreds of nonzero values.
        if number(row, "epsilon") > 4.0 {
            continue;
        }
        for (measured, closed, error) in [
            ("measured_abs", "closed_abs", "abs_standard_error"),
            (
                "measured_variance",
                "closed_variance",
                "variance_standard_error",
            ),
        ] {
            let z = (number(row, measured) - number(row, closed)) / number(row, error);
            assert!(z.abs() <= 6.0, "{measured}: z = {z} in {row:?}");
        }
    }
}

#[test]
fn histogram_errors_match_fifty_times_the_noise_error() {
    let folder = run_quick(Experiment::Histogram);
    let counts = rows(&folder, "histogram_true_counts.csv");
    assert_eq!(counts.len(), 50);
    let people: f64 = counts.iter().map(|r| number(r, "people")).sum();
    assert_eq!(
        people, 32_561.0,
        "every person of the training file is counted once"
    );
    for row in rows(&folder, "histogram.csv") {
        if number(&row, "epsilon") > 1.0 {
            continue;
        }
        let standard_error = number(&row, "sd_l1_error") / number(&row, "releases").sqrt();
        let z = (number(&row, "mean_l1_error") - number(&row, "closed_form_mean_l1_error"))
            / standard_error;
        assert!(z.abs() <= 6.0, "z = {z} in {row:?}");
    }
}

#[test]
fn mean_height_uses_the_sampled_typical_sensitivity() {
    let folder = run_quick(Experiment::MeanHeight);
    let rows = rows(&folder, "mean_height.csv");
    let typical = rows
        .iter()
        .find(|r| r["sensitivity_kind"] == "typical sensitivity")
        .map(|r| number(r, "sensitivity_cm"))
        .unwrap();
    // 2,000 sampled distances: the mean is within 10% (about 6 standard errors).
    assert!(
        (typical / typical_sensitivity_closed_form() - 1.0).abs() < 0.10,
        "{typical}"
    );
    // Error grows with the sensitivity at every ε.
    for epsilon in rows.iter().map(|r| r["epsilon"].clone()) {
        let at: Vec<f64> = rows
            .iter()
            .filter(|r| r["epsilon"] == epsilon)
            .map(|r| number(r, "mean_abs_error_cm"))
            .collect();
        assert_eq!(at.len(), 3);
    }
}

#[test]
fn exponential_frequencies_match_the_exact_probabilities() {
    let folder = run_quick(Experiment::Exponential);
    let mut checked = 0;
    for row in rows(&folder, "exponential.csv") {
        if row["observed_frequency"].is_empty() {
            continue;
        }
        let draws = number(&row, "draws");
        let p = number(&row, "exact_probability");
        let observed = number(&row, "observed_frequency");
        // Six binomial standard deviations, and at least one draw's worth.
        let tolerance = 6.0 * (p * (1.0 - p) / draws).sqrt() + 1.0 / draws;
        assert!((observed - p).abs() <= tolerance, "{row:?}");
        checked += 1;
    }
    assert_eq!(checked, 7 * 5, "7 statuses at ε = 1 and four smaller ε");
}

#[test]
fn composition_charges_the_accountant_totals() {
    let folder = run_quick(Experiment::Composition);
    let rows = rows(&folder, "composition.csv");
    let mut totals: Vec<(String, f64)> = Vec::new();
    for row in &rows {
        let entry = (row["release"].clone(), number(row, "accountant_epsilon"));
        if !totals.contains(&entry) {
            totals.push(entry);
        }
    }
    let charged: Vec<f64> = totals.iter().map(|t| (t.1 * 1e9).round() / 1e9).collect();
    assert_eq!(charged, vec![0.1, 0.2, 0.3, 0.3]);
    assert_eq!(rows.len(), 4 * 300);
}

#[test]
fn densities_integrate_to_one() {
    run_quick(Experiment::Densities);
    let integrate = |f: &dyn Fn(f64) -> f64, half_width: f64| {
        let steps = 400_000;
        let h = 2.0 * half_width / steps as f64;
        (0..steps)
            .map(|i| f(-half_width + (i as f64 + 0.5) * h))
            .sum::<f64>()
            * h
    };
    for epsilon in [0.5, 1.0, 4.0] {
        let gamma = 1.0 / (1.0 + (epsilon / 2.0f64).exp());
        // The staircase is constant on [k, k + γ) and [k + γ, k + 1): sum
        // each piece's width times the density at its middle, both signs.
        let staircase: f64 = (0..400)
            .map(|k| {
                let k = k as f64;
                let first = staircase_density(k + gamma / 2.0, epsilon, gamma, 1.0) * gamma;
                let second =
                    staircase_density(k + (1.0 + gamma) / 2.0, epsilon, gamma, 1.0) * (1.0 - gamma);
                2.0 * (first + second)
            })
            .sum();
        assert!(
            (staircase - 1.0).abs() < 1e-12,
            "staircase at ε = {epsilon}: {staircase}"
        );
        assert_eq!(
            staircase_density(-0.3, epsilon, gamma, 1.0),
            staircase_density(0.3, epsilon, gamma, 1.0)
        );
        let laplace = integrate(&|x| laplace_density(x, epsilon, 1.0), 200.0);
        assert!(
            (laplace - 1.0).abs() < 1e-4,
            "Laplace at ε = {epsilon}: {laplace}"
        );
    }
    let gaussian = integrate(&|x| gaussian_density(x, 7.0), 100.0);
    assert!((gaussian - 1.0).abs() < 1e-6);
}

/// The false-failure probability of each statistical check below: with a
/// dozen such checks, a correct build fails less than once in 10⁶ runs.
const FALSE_ALARM: f64 = 1e-8;

fn adult_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult")
}

/// Column `name` of Adult file `file`, read here without the lab's reader.
fn adult_column(file: &str, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(adult_folder().join(file)).unwrap();
    let mut lines = text.lines().filter(|line| !line.is_empty());
    let index = lines
        .next()
        .unwrap()
        .split(',')
        .position(|field| field == name)
        .unwrap();
    lines
        .map(|line| line.split(',').nth(index).unwrap().to_string())
        .collect()
}

/// The Bernoulli relative entropy KL(q ‖ p): `n·KL` bounds the log-probability
/// that `n` draws show frequency `q` (Chernoff).
fn bernoulli_kl(q: f64, p: f64) -> f64 {
    let term = |a: f64, b: f64| if a == 0.0 { 0.0 } else { a * (a / b).ln() };
    term(q, p) + term(1.0 - q, 1.0 - p)
}

/// The Cramér rate `sup_θ (θ·m − Λ(θ))` over `θ` in the open interval
/// `domain` where the log-moment-generating function `Λ` is finite (ternary
/// search: the objective is concave).
fn cramer_rate(m: f64, log_mgf: &dyn Fn(f64) -> f64, domain: (f64, f64)) -> f64 {
    let objective = |theta: f64| theta * m - log_mgf(theta);
    let inside = 1.0 - 1e-12;
    let (mut low, mut high) = (domain.0 * inside, domain.1 * inside);
    for _ in 0..400 {
        let (a, b) = (low + (high - low) / 3.0, high - (high - low) / 3.0);
        if objective(a) < objective(b) {
            low = a;
        } else {
            high = b;
        }
    }
    objective(0.5 * (low + high)).max(0.0)
}

/// Whether the mean of `sample` is consistent with a law of mean `expected`
/// and log-MGF `log_mgf` (finite on `domain`): by the Chernoff bound,
/// `P(n·I(mean) > ln(2/α)) ≤ α`. `slack` (relative) absorbs dpkit's grid
/// and calibration, which move `E|X|` by at most 0.1% (see `Laplace`).
fn chernoff_consistent(
    sample: &[f64],
    expected: f64,
    log_mgf: &dyn Fn(f64) -> f64,
    domain: (f64, f64),
    slack: f64,
) -> bool {
    let n = sample.len() as f64;
    let mean = sample.iter().sum::<f64>() / n;
    let gap = ((mean - expected).abs() - slack * expected.abs()).max(0.0);
    let rate = cramer_rate(expected + gap.copysign(mean - expected), log_mgf, domain);
    n * rate <= (2.0 / FALSE_ALARM).ln()
}

#[test]
fn exponential_follows_the_seed_and_matches_the_csv_counts() {
    let folder = run_quick(Experiment::Exponential);
    // Independently: utility count/1000, Δu = 1, ε = 1 (the seed notebook's),
    // P(a) = exp(u_a/2) / Σ exp(u/2), over both Adult files.
    let mut counts: std::collections::HashMap<String, f64> = Default::default();
    for file in ["adult.data.csv", "adult.test.csv"] {
        for status in adult_column(file, "marital-status") {
            *counts.entry(status).or_default() += 1.0;
        }
    }
    assert_eq!(counts.values().sum::<f64>(), 48_842.0);
    let best = counts.values().copied().fold(0.0, f64::max);
    let weight = |count: f64| ((count - best) / 1000.0 / 2.0).exp();
    let total: f64 = counts.values().map(|&c| weight(c)).sum();
    let married = weight(counts["Married-civ-spouse"]) / total;
    assert!((married - 0.958).abs() < 5e-4, "closed form {married}");

    let rows = rows(&folder, "exponential.csv");
    let at = |sensitivity: f64, drawn: bool| -> Vec<_> {
        rows.iter()
            .filter(|r| {
                number(r, "epsilon") == 1.0
                    && number(r, "utility_sensitivity") == sensitivity
                    && r["observed_frequency"].is_empty() != drawn
            })
            .collect()
    };
    let seed = at(1.0, true);
    assert_eq!(seed.len(), 7);
    for row in &seed {
        let status = &row["marital_status"];
        assert_eq!(number(row, "count"), counts[status]);
        // dpkit calibrates to ε(1 − 10⁻⁶) and rounds weights to 2.4e-10:
        // the probabilities move by less than 2e-7.
        let p = weight(counts[status]) / total;
        assert!(
            (number(row, "exact_probability") - p).abs() < 1e-6,
            "{row:?}"
        );
    }
    let top = seed
        .iter()
        .find(|r| r["marital_status"] == "Married-civ-spouse")
        .unwrap();
    let (draws, observed) = (number(top, "draws"), number(top, "observed_frequency"));
    assert!(
        draws * bernoulli_kl(observed, married) <= (2.0 / FALSE_ALARM).ln(),
        "{observed} in {draws} draws against {married}"
    );
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains(&format!("= {married:.4} on both files together")));

    // With the true Δu = 1/1000 only the 2⁻³⁰ weight floor is left for the others.
    let floor = 2f64.powi(-30) / (1.0 + 6.0 * 2f64.powi(-30));
    for row in at(0.001, false) {
        let expected = if row["marital_status"] == "Married-civ-spouse" {
            1.0 - 6.0 * floor
        } else {
            floor
        };
        assert!(
            (number(row, "exact_probability") / expected - 1.0).abs() < 1e-6,
            "{row:?}"
        );
    }
}

#[test]
fn composition_releases_the_books_count_with_laplace_noise() {
    let folder = run_quick(Experiment::Composition);
    let over_fifty = adult_column("adult.data.csv", "age")
        .iter()
        .filter(|age| age.parse::<i64>().unwrap() > 50)
        .count() as f64;
    assert_eq!(over_fifty, 6460.0);
    let rows = rows(&folder, "composition.csv");
    let sample = |release: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r["release"] == release)
            .map(|r| {
                assert_eq!(number(r, "true_count"), over_fifty);
                let error = number(r, "error");
                assert!((number(r, "released") - over_fifty - error).abs() < 1e-6);
                error
            })
            .collect()
    };
    // Laplace of scale λ: Λ(θ) = −ln(1 − λ²θ²); |X| is exponential of mean λ.
    for (release, scale) in [
        ("ε₁ = 0.1 release", 10.0),
        ("ε₂ = 0.2 release", 5.0),
        ("one ε = 0.3 release", 10.0 / 3.0),
    ] {
        let errors = sample(release);
        assert_eq!(errors.len(), 300);
        let signed = |t: f64| -(1.0 - scale * scale * t * t).ln();
        let domain = (-1.0 / scale, 1.0 / scale);
        assert!(
            chernoff_consistent(&errors, 0.0, &signed, domain, 0.0),
            "{release}: mean"
        );
        let absolute: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        let exponential = |t: f64| -(1.0 - scale * t).ln();
        assert!(
            chernoff_consistent(&absolute, scale, &exponential, (-1e6, 1.0 / scale), 1e-3),
            "{release}: mean |error| against {scale}"
        );
    }
    // The average of Laplace(a) and Laplace(b): |X₁ + X₂| has density
    // (a²·Exp_a − b²·Exp_b)/(a² − b²), so E|(X₁ + X₂)/2| = (a² + ab + b²)/(2(a + b)).
    let (a, b) = (10.0f64, 5.0f64);
    let errors = sample("average of the two");
    let signed = |t: f64| -(1.0 - a * a * t * t / 4.0).ln() - (1.0 - b * b * t * t / 4.0).ln();
    assert!(
        chernoff_consistent(&errors, 0.0, &signed, (-2.0 / a, 2.0 / a), 0.0),
        "average: mean"
    );
    let absolute: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    let mgf =
        |t: f64| (a * a / (1.0 - a * t / 2.0) - b * b / (1.0 - b * t / 2.0)) / (a * a - b * b);
    let expected = (a * a + a * b + b * b) / (2.0 * (a + b));
    assert!(
        chernoff_consistent(&absolute, expected, &|t| mgf(t).ln(), (-1e6, 2.0 / a), 1e-3),
        "average: mean |error| against {expected}"
    );
    // Laplace noise is real-valued (on a grid of at most 2⁻¹⁰): a whole-number
    // error has probability below 1e-3, where integer noise always gives one.
    let whole = rows
        .iter()
        .filter(|r| number(r, "error").fract() == 0.0)
        .count();
    assert!(whole * 10 < rows.len(), "{whole} whole-number errors");
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(report.contains("6460 people older than 50") && report.contains("Laplace"));
}

/// `P(|h − h'| ≤ x)` for the two-component height model, by integrating
/// `f(h)·(F(h + x) − F(h − x))` numerically (independent of the lab's
/// pairwise closed form).
fn height_distance_cdf(x: f64) -> f64 {
    let components = [(0.5, 178.0, 7.0), (0.5, 162.0, 6.5)];
    let density = |h: f64| -> f64 {
        components
            .iter()
            .map(|&(w, m, s): &(f64, f64, f64)| {
                w * (-0.5 * ((h - m) / s).powi(2)).exp() / (s * (2.0 * std::f64::consts::PI).sqrt())
            })
            .sum()
    };
    let cdf = |h: f64| -> f64 {
        components
            .iter()
            .map(|&(w, m, s): &(f64, f64, f64)| {
                w * 0.5 * (1.0 + libm::erf((h - m) / (s * 2f64.sqrt())))
            })
            .sum()
    };
    let (low, high, steps) = (90.0, 250.0, 40_000);
    let step = (high - low) / steps as f64;
    (0..steps)
        .map(|i| {
            let h = low + (i as f64 + 0.5) * step;
            density(h) * (cdf(h + x) - cdf(h - x))
        })
        .sum::<f64>()
        * step
}

/// `P(Bin(n, p) ≥ k)` and `P(Bin(n, p) < k)`, summed term by term.
fn binomial_tails(n: usize, k: usize, p: f64) -> (f64, f64) {
    let log_pmf = |j: usize| {
        let (n, j) = (n as f64, j as f64);
        libm::lgamma(n + 1.0) - libm::lgamma(j + 1.0) - libm::lgamma(n - j + 1.0)
            + j * p.ln()
            + (n - j) * (1.0 - p).ln()
    };
    let at_least: f64 = (k..=n).map(|j| log_pmf(j).exp()).sum();
    let below: f64 = (0..k).map(|j| log_pmf(j).exp()).sum();
    (at_least, below)
}

#[test]
fn mean_height_reports_the_sampled_quantile_sensitivity() {
    let folder = run_quick(Experiment::MeanHeight);
    let rows = rows(&folder, "mean_height_sensitivity.csv");
    let row = |kind: &str| rows.iter().find(|r| r["sensitivity_kind"] == kind).unwrap();
    let quantile = row("sampled quantile sensitivity");
    let typical = number(row("typical sensitivity"), "sensitivity_cm");
    let sensitivity = number(quantile, "sensitivity_cm");
    let (m, k) = (number(quantile, "samples"), number(quantile, "rank"));
    let (gamma, rho) = (number(quantile, "gamma"), number(quantile, "rho"));
    assert_eq!((m, gamma, rho), (2000.0, 0.05, 0.05));
    assert_eq!(
        k,
        (m * (1.0 - gamma + ((1.0 / rho).ln() / (2.0 * m)).sqrt())).ceil()
    );
    assert!(sensitivity > typical, "{sensitivity} ≤ {typical}");
    // The k-th of m sampled distances sits at F⁻¹ of a Beta(k, m + 1 − k)
    // draw: P(Bin(m, F(s)) ≥ k) is uniform on (0, 1).
    let level = height_distance_cdf(sensitivity);
    let (at_least, below) = binomial_tails(m as usize, k as usize, level);
    assert!(
        at_least >= FALSE_ALARM / 2.0 && below >= FALSE_ALARM / 2.0,
        "F({sensitivity}) = {level}: tails {at_least}, {below}"
    );
    // The lab's closed-form quantile at k/m agrees with this integral.
    let closed = number(quantile, "closed_form_cm");
    assert!(
        (height_distance_cdf(closed) - k / m).abs() < 1e-6,
        "{closed}"
    );
    let report = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(
        report.contains(&format!("which is {sensitivity:.2} cm")),
        "the report quotes the quantile sensitivity"
    );
}
