//! MST on the pre-discretised UCI Adult (data/adult-discretised/), measured
//! as issue 64 measures Private-PGM: wall time, and the mean and max
//! total-variation distance ½‖p − p̂‖₁ (normalised) between the true and
//! the synthetic marginals over all 2-way marginals and over all 3-way
//! marginals with at most 10,000 cells.
//!
//! ```text
//! cargo run --release -p dpkit-synth --example adult_mst -- --epsilon 1 --delta 1e-9 --seed 0 [--out synth.csv]
//! ```
//!
//! The seed keys a reproducible generator: this is an experiment on public
//! data, never a release about real people (that is `Synthesizer::run`).

mod adult;

use dpkit_synth::{Mst, Release};

use adult::{adult, argument, report, save, setting, synthesize};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let setting = setting()?;
    let iterations: usize = argument("--iterations", "3000").parse()?;
    let mut table = adult()?;
    let mst = Mst::new(setting.rho, 1.0)?.with_iterations(iterations, 1_000);
    let mut run = synthesize("MST", &mst, &mut table, &setting)?;
    let release = &run.release;
    let (sigma_one, sigma_two) = release.sigmas();
    println!(
        "  charged ρ = {:.6} (spread {:.1e}, tail {:.1e}); σ 1-way {sigma_one:.1}, 2-way {sigma_two:.1}",
        release.cost().rho(),
        release.cost().spread(),
        release.cost().tail()
    );
    println!("  pairs: {:?}", release.pairs());
    println!(
        "  time: {:.2} s ({:.2} s to the fitted model, {iterations} mirror-descent steps)",
        run.elapsed, run.fitted
    );
    report(&mut table, &mut run.synthetic);
    save(&run.synthetic)
}
