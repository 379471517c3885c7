//! MST audited on neighbouring tables: its noisy first 1-way marginal, run
//! after run, separates a table from the one without a person no more than
//! the (ε, δ) it is charged allows; with that marginal's noise taken off
//! (a planted hole), the auditor catches it.

use dpkit_audit::{AuditReport, AuditSettings, NeighbouringOutputs, audit};
use dpkit_core::rng::InsecureSeededRng;
use dpkit_synth::{Domain, Mst, Synthesizer, Table};

/// 300 rows over three binary columns, and the neighbour without the last.
fn neighbours() -> (Table, Table) {
    let domain = Domain::new(vec![2, 2, 2]).unwrap();
    let rows: Vec<Vec<u32>> = (0..300u32)
        .map(|i| vec![i % 2, (i / 2) % 2, u32::from(i % 3 == 0)])
        .collect();
    let with = Table::from_rows(domain.clone(), &rows).unwrap();
    let without = Table::from_rows(domain, &rows[..rows.len() - 1]).unwrap();
    (with, without)
}

/// The audit of MST at (1, 10⁻⁹) over `samples` runs on each neighbour,
/// the statistic being the noisy count of code 1 of column 0 (the last
/// row's code there is 1).
fn audited(samples: usize) -> AuditReport {
    let (with, without) = neighbours();
    let domain = Domain::new(vec![2, 2, 2]).unwrap();
    let (mst, cost) = Mst::within(1.0, 1e-9, 1.0, &domain).unwrap();
    let mst = mst.with_iterations(3, 3);
    let mut rng = InsecureSeededRng::from_seed_for_testing(64);
    let mut run = |table: &Table| -> Vec<f64> {
        (0..samples)
            .map(|_| {
                let release = mst.run_with_rng(&mut table.clone(), &mut rng).unwrap();
                release.noisy_one_way()[0][1]
            })
            .collect()
    };
    let outputs = NeighbouringOutputs {
        mechanism: "MST".into(),
        declared: cost.loss,
        first_input: "300 rows".into(),
        second_input: "the same without the last".into(),
        first: run(&with),
        second: run(&without),
    };
    // A correct MST shows a violation at this level less than once in 10⁶.
    let settings = AuditSettings {
        samples_per_input: samples,
        confidence: 1.0 - 1e-6,
    };
    audit(&outputs, &settings).unwrap()
}

#[test]
fn mst_keeps_its_charge_on_neighbouring_tables() {
    let report = audited(4_000);
    assert!(!report.violation_found(), "{report}");
}

#[cfg(feature = "planted-holes")]
#[test]
fn a_marginal_measured_without_noise_is_caught_by_the_audit() {
    use dpkit_planted::{Hole, clear, plant};
    plant(Hole::UnnoisedMarginal);
    let report = audited(4_000);
    clear();
    assert!(report.violation_found(), "{report}");
}
