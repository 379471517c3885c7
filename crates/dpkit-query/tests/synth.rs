//! The marginals `dpkit synth` measures, on neighbouring tables: one
//! person's rows move every marginal by at most the sensitivity the charge
//! assumed, whatever they hold.

use std::path::{Path, PathBuf};

#[path = "support/clinic.rs"]
mod clinic;
#[path = "support/fixture.rs"]
mod fixture;

use dpkit_query::{Description, QueryEngine};

/// The clinic in a folder of its own, with one more person holding
/// `visits` visits (none: the neighbour without them).
fn clinic_with(name: &str, visits: usize) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("dpkit-synth-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    for file in ["departments.csv", "people.csv", "visits.csv"] {
        std::fs::copy(clinic::clinic_folder().join(file), folder.join(file)).unwrap();
    }
    // The rows a cap keeps in a fixed order, so that the two neighbours'
    // counts differ only by the person (the default draws them afresh).
    let text = std::fs::read_to_string(clinic::clinic_folder().join("clinic.toml")).unwrap();
    let ordered = text.replacen(
        "[privacy_unit]\n",
        "[privacy_unit]\nkeep = \"ordered\"\n",
        1,
    );
    assert_ne!(ordered, text);
    std::fs::write(folder.join("clinic.toml"), ordered).unwrap();
    if visits > 0 {
        let mut people = std::fs::read_to_string(folder.join("people.csv")).unwrap();
        people.push_str("900001,99,F,west\n");
        std::fs::write(folder.join("people.csv"), people).unwrap();
        let mut rows = std::fs::read_to_string(folder.join("visits.csv")).unwrap();
        for visit in 0..visits {
            rows.push_str(&format!("900001,{},radiology,1500\n", 1 + visit % 12));
        }
        std::fs::write(folder.join("visits.csv"), rows).unwrap();
    }
    folder
}

/// Every 1- and 2-way marginal of `table` on the clinic in `folder`, and
/// the sensitivity their plans give.
fn marginals(folder: &Path, table: &str) -> (Vec<Vec<u64>>, f64) {
    let description = Description::load(&folder.join("clinic.toml")).unwrap();
    clinic::synth_marginals(&QueryEngine::open(description).unwrap(), table)
}

fn l1(a: &[u64], b: &[u64]) -> u64 {
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).sum()
}

#[test]
fn one_person_moves_each_marginal_by_at_most_the_charged_sensitivity() {
    let with = clinic_with("with", 40);
    let without = clinic_with("without", 0);
    for (table, cap) in [("visits", 12u64), ("people", 1)] {
        let (a, sensitivity) = marginals(&with, table);
        let (b, same) = marginals(&without, table);
        assert_eq!((sensitivity, same), (cap as f64, cap as f64), "{table}");
        for (x, y) in a.iter().zip(&b) {
            // The person's 40 visits are cut to the cap of 12: a plan
            // without the cap would move each marginal by 40.
            assert_eq!(l1(x, y), cap, "{table}");
        }
    }
    let _ = std::fs::remove_dir_all(with);
    let _ = std::fs::remove_dir_all(without);
}
