//! AIM on the pre-discretised UCI Adult (data/adult-discretised/), measured
//! as `adult_mst` measures MST: wall time, and the mean and max
//! total-variation distance between the true and the synthetic marginals
//! over all 2-way marginals and all 3-way marginals of at most 10,000 cells.
//! The workload is AIM's default, all 2-way marginals; the model is held
//! to 80 MB, as in the paper.
//!
//! ```text
//! cargo run --release -p dpkit-synth --example adult_aim -- --epsilon 1 --delta 1e-9 --seed 0 [--out synth.csv]
//! ```
//!
//! The seed keys a reproducible generator: this is an experiment on public
//! data, never a release about real people (that is `Synthesizer::run`).

mod adult;

use dpkit_synth::{Aim, Release};

use adult::{adult, argument, report, save, setting, synthesize};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let setting = setting()?;
    let iterations: usize = argument("--iterations", "1000").parse()?;
    let last: usize = argument("--final-iterations", "1000").parse()?;
    let max_mb: f64 = argument("--max-model-mb", "80").parse()?;
    let mut table = adult()?;
    let aim = Aim::new(setting.rho, 1.0)?
        .with_iterations(iterations, last)
        .with_max_model_mb(max_mb);
    let mut run = synthesize("AIM", &aim, &mut table, &setting)?;
    let release = &run.release;
    println!(
        "  charged ρ = {:.6} (spread {:.1e}, tail {:.1e}); σ 1-way {:.1}; {} rounds",
        release.cost().rho(),
        release.cost().spread(),
        release.cost().tail(),
        release.one_way_sigma(),
        release.rounds().len()
    );
    for round in release.rounds() {
        println!(
            "  {:?}: σ {:.1}, ε {:.4}, model {:.2} MB of {:.2}{}",
            round.columns,
            round.sigma,
            round.epsilon,
            round.model_mb,
            round.limit_mb,
            if round.annealed { ", annealed" } else { "" }
        );
    }
    println!(
        "  time: {:.2} s ({:.2} s to the fitted model; {iterations} mirror-descent steps a round, {last} at the end)",
        run.elapsed, run.fitted
    );
    report(&mut table, &mut run.synthetic);
    save(&run.synthetic)
}
