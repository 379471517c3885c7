//! Experiment 1: nanoseconds per noise value, every mechanism, two generators,
//! batch and scalar, next to a naive f64 Laplace timed in the same run.

#[path = "../../../dpkit-core/tests/support/naive_laplace.rs"]
mod naive_laplace;

use std::hint::black_box;
use std::time::Instant;

use dpkit_core::mechanism::{
    BinaryRandomizedResponse, DiscreteGaussian, DiscreteStaircase, ExponentialMechanism, Gaussian,
    IntegerMechanism, KaryRandomizedResponse, Laplace, RealMechanism, ReportNoisyMax, Staircase,
    StaircaseGamma, TwoSidedGeometric,
};
use dpkit_core::rng::{InsecureFastSeededRng, SecureRng};
use dpkit_plot::{BarFigure, BarGroup};
use naive_laplace::NaiveFloatLaplace;
use rand_core::CryptoRng;

use crate::Context;
use crate::error::Result;
use crate::output::{Section, markdown_table, significant};

/// Median, min and max of the repeats, in ns per value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// The median repeat.
    pub median: f64,
    /// The fastest repeat.
    pub min: f64,
    /// The slowest repeat.
    pub max: f64,
}

fn time_repeats(repeats: usize, values: usize, mut run: impl FnMut()) -> Timing {
    run(); // warm-up: caches, branch predictors, the generator's buffer
    let mut per_value: Vec<f64> = (0..repeats)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_nanos() as f64 / values as f64
        })
        .collect();
    per_value.sort_by(f64::total_cmp);
    Timing {
        median: per_value[repeats / 2],
        min: per_value[0],
        max: per_value[repeats - 1],
    }
}

/// One mechanism timed on one generator: (batch, scalar).
type Pair = (Timing, Timing);

struct Plan {
    values: usize,
    repeats: usize,
}

/// Times a real-valued release: `batch` fills a slice, `scalar` releases one value.
fn real_timing<R: CryptoRng>(
    plan: &Plan,
    rng: &mut R,
    mut batch: impl FnMut(&mut [f64], &mut R),
    mut scalar: impl FnMut(f64, &mut R) -> f64,
) -> Pair {
    let mut buffer = vec![0.0; plan.values];
    let batch = time_repeats(plan.repeats, plan.values, || {
        buffer
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as f64 * 0.25);
        batch(&mut buffer, rng);
        black_box(&buffer);
    });
    let scalar = time_repeats(plan.repeats, plan.values, || {
        for i in 0..plan.values {
            black_box(scalar(black_box(i as f64 * 0.25), rng));
        }
    });
    (batch, scalar)
}

fn real<R: CryptoRng>(plan: &Plan, mechanism: &impl RealMechanism, rng: &mut R) -> Pair {
    real_timing(
        plan,
        rng,
        |buffer, rng| {
            mechanism
                .privatize_slice_with_rng(buffer, rng)
                .expect("finite values")
        },
        |value, rng| mechanism.privatize_with_rng(value, rng).unwrap_or(f64::NAN),
    )
}

fn integer<R: CryptoRng>(plan: &Plan, mechanism: &impl IntegerMechanism, rng: &mut R) -> Pair {
    let mut buffer = vec![0i64; plan.values];
    let batch = time_repeats(plan.repeats, plan.values, || {
        buffer
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as i64);
        mechanism.privatize_slice_with_rng(&mut buffer, rng);
        black_box(&buffer);
    });
    let scalar = time_repeats(plan.repeats, plan.values, || {
        for i in 0..plan.values {
            black_box(mechanism.privatize_with_rng(black_box(i as i64), rng));
        }
    });
    (batch, scalar)
}

/// Mechanisms without a batch method: batch is a loop of scalar calls.
fn per_call<R: CryptoRng>(plan: &Plan, rng: &mut R, mut call: impl FnMut(usize, &mut R)) -> Pair {
    let timing = time_repeats(plan.repeats, plan.values, || {
        for i in 0..plan.values {
            call(i, rng);
        }
    });
    (timing, timing)
}

const NAMES: [&str; 12] = [
    "naive f64 Laplace (insecure)",
    "Laplace",
    "staircase (L1 γ)",
    "staircase (L2 γ)",
    "Gaussian (δ = 1e-6)",
    "two-sided geometric",
    "discrete staircase (Δ = 5)",
    "discrete Gaussian (δ = 1e-6)",
    "binary randomized response",
    "4-ary randomized response",
    "exponential (4 candidates)",
    "report-noisy-max (4 candidates)",
];

/// Times every mechanism at ε = 1, Δ = 1 on `rng`.
fn time_all<R: CryptoRng>(plan: &Plan, rng: &mut R, tick: &mut dyn FnMut()) -> Result<Vec<Pair>> {
    let naive = NaiveFloatLaplace { scale: 1.0 };
    let mut rows = Vec::with_capacity(NAMES.len());
    // The naive sampler has no batch method: its batch is a loop over the slice.
    rows.push(real_timing(
        plan,
        rng,
        |buffer, rng| {
            for v in buffer.iter_mut() {
                *v = naive.privatize(*v, rng);
            }
        },
        |value, rng| naive.privatize(value, rng),
    ));
    tick();
    rows.push(real(plan, &Laplace::new(1.0, 1.0)?, rng));
    tick();
    rows.push(real(plan, &Staircase::new(1.0, 1.0)?, rng));
    tick();
    let l2 = Staircase::with_gamma(1.0, 1.0, StaircaseGamma::L2Optimal)?;
    rows.push(real(plan, &l2, rng));
    tick();
    rows.push(real(plan, &Gaussian::new(1.0, 1e-6, 1.0)?, rng));
    tick();
    rows.push(integer(plan, &TwoSidedGeometric::new(1.0, 1)?, rng));
    tick();
    rows.push(integer(plan, &DiscreteStaircase::new(1.0, 5)?, rng));
    tick();
    rows.push(integer(plan, &DiscreteGaussian::new(1.0, 1e-6, 1)?, rng));
    tick();
    let binary = BinaryRandomizedResponse::new(0.5)?;
    rows.push(per_call(plan, rng, |i, rng| {
        black_box(binary.privatize_with_rng(i % 2 == 0, rng));
    }));
    tick();
    let kary = KaryRandomizedResponse::new(1.0, 4)?;
    rows.push(per_call(plan, rng, |i, rng| {
        black_box(kary.privatize_with_rng((i % 4) as u64, rng).ok());
    }));
    tick();
    let utilities = [3.0, 1.0, 0.0, 2.0];
    let exponential = ExponentialMechanism::new(1.0, 1.0)?;
    rows.push(per_call(plan, rng, |_, rng| {
        black_box(exponential.select_with_rng(black_box(&utilities), rng).ok());
    }));
    tick();
    let noisy_max = ReportNoisyMax::new(1.0, 1.0)?;
    rows.push(per_call(plan, rng, |_, rng| {
        black_box(noisy_max.select_with_rng(black_box(&utilities), rng).ok());
    }));
    tick();
    Ok(rows)
}

fn cell(t: Timing) -> String {
    format!(
        "{} ({}–{})",
        significant(t.median, 3),
        significant(t.min, 3),
        significant(t.max, 3)
    )
}

/// Runs the experiment.
pub fn run(context: &mut Context) -> Result<Section> {
    let settings = context.settings;
    let plan = Plan {
        values: settings.pick(1_000_000, 5_000),
        repeats: settings.pick(11, 3),
    };
    let bar = context.progress(2 * NAMES.len() as u64, "speed");
    let mut tick = || bar.inc(1);
    let secure = time_all(&plan, &mut SecureRng::from_os()?, &mut tick)?;
    // The seeded generator's seed only fixes which noise is drawn; timings
    // do not depend on it.
    let seed = settings.seed.unwrap_or(0);
    let fast = time_all(
        &plan,
        &mut InsecureFastSeededRng::from_seed_for_experiments(seed),
        &mut tick,
    )?;
    bar.finish_and_clear();

    let naive = secure[0].0.median;
    let header = [
        "mechanism",
        "secure ChaCha12, batch",
        "secure, scalar",
        "seeded ChaCha8, batch",
        "seeded ChaCha8, scalar",
        "secure batch / naive",
    ];
    let rows: Vec<Vec<String>> = NAMES
        .iter()
        .zip(secure.iter().zip(&fast))
        .map(|(name, (s, f))| {
            vec![
                name.to_string(),
                cell(s.0),
                cell(s.1),
                cell(f.0),
                cell(f.1),
                format!("{:.2}", s.0.median / naive),
            ]
        })
        .collect();
    let csv_rows: Vec<Vec<String>> = NAMES
        .iter()
        .zip(secure.iter().zip(&fast))
        .flat_map(|(name, (s, f))| {
            [
                ("secure ChaCha12", "batch", s.0),
                ("secure ChaCha12", "scalar", s.1),
                ("seeded ChaCha8", "batch", f.0),
                ("seeded ChaCha8", "scalar", f.1),
            ]
            .map(|(generator, mode, t)| {
                vec![
                    name.to_string(),
                    generator.into(),
                    mode.into(),
                    t.median.to_string(),
                    t.min.to_string(),
                    t.max.to_string(),
                ]
            })
        })
        .collect();
    let csv = context.out.csv(
        "speed",
        &[
            "mechanism",
            "generator",
            "mode",
            "median_ns",
            "min_ns",
            "max_ns",
        ],
        &csv_rows,
    )?;
    let group = |name: &str, pick: &dyn Fn(&Pair) -> Timing, source: &[Pair]| BarGroup {
        name: name.into(),
        values: source.iter().map(|p| pick(p).median).collect(),
        ranges: source.iter().map(|p| (pick(p).min, pick(p).max)).collect(),
    };
    let figure = BarFigure {
        title: format!(
            "Nanoseconds per noise value at ε = 1 (median of {} runs, whiskers min–max)",
            plan.repeats
        ),
        value_label: "ns per value".into(),
        categories: NAMES.iter().map(|n| n.to_string()).collect(),
        groups: vec![
            group("secure ChaCha12, batch", &|p| p.0, &secure),
            group("secure ChaCha12, scalar", &|p| p.1, &secure),
            group("seeded ChaCha8, batch", &|p| p.0, &fast),
            group("seeded ChaCha8, scalar", &|p| p.1, &fast),
        ],
    };
    let png = context.out.figure("speed", &figure)?;

    let ratio = |row: usize| secure[row].0.median / naive;
    let fastest_exact = (1..8)
        .min_by(|&a, &b| secure[a].0.median.total_cmp(&secure[b].0.median))
        .unwrap_or(1);
    let paragraph = format!(
        "Each mechanism released {values} values per run at ε = 1, Δ = 1, {repeats} runs each, \
         after a warm-up run; the naive f64 inverse-CDF Laplace ran on the same generators in \
         the same process. With the OS-seeded ChaCha12 generator, a batch of Laplace noise cost \
         {laplace} ns per value ({laplace_ratio:.2}× the naive Laplace's {naive} ns), the \
         staircase {staircase} ns ({staircase_ratio:.2}×) and the two-sided geometric {geometric} \
         ns ({geometric_ratio:.2}×). The fastest exact sampler was the {fastest}. The seeded \
         ChaCha8 generator shows how much of each cost is the generator itself. Across the \
         exact samplers a scalar call cost {scalar_low:.2}–{scalar_high:.2}× a batch value.",
        scalar_low = (1..8)
            .map(|row| secure[row].1.median / secure[row].0.median)
            .fold(f64::INFINITY, f64::min),
        scalar_high = (1..8)
            .map(|row| secure[row].1.median / secure[row].0.median)
            .fold(0.0, f64::max),
        values = plan.values,
        repeats = plan.repeats,
        laplace = significant(secure[1].0.median, 3),
        laplace_ratio = ratio(1),
        naive = significant(naive, 3),
        staircase = significant(secure[2].0.median, 3),
        staircase_ratio = ratio(2),
        geometric = significant(secure[5].0.median, 3),
        geometric_ratio = ratio(5),
        fastest = NAMES[fastest_exact],
    );
    let mut paragraphs = vec![paragraph];
    if settings.quick {
        paragraphs.push(
            "Quick mode timed only a few thousand values per run, often in an unoptimised \
             build: these numbers check that the experiment runs, not how fast dpkit is."
                .into(),
        );
    }
    Ok(Section {
        title: "Speed".into(),
        figures: vec![(png, "ns per value for every mechanism".into())],
        tables: vec![markdown_table(&header, &rows)],
        paragraphs,
        csv_files: vec![csv],
    })
}
