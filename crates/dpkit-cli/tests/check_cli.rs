//! `dpkit check`, run as a curator would: the data file against its
//! description, before the description is published.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dpkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpkit"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn folder(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("dpkit-check-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

/// Penguins as pandas writes them: a blank and an `NA` for missing masses,
/// masses with a decimal point, a quoted comma, a species no domain lists.
const PENGUINS: &str = "species,island,body_mass_g,note\n\
    Adelie,Torgersen,3750.0,ok\n\
    Adelie,Torgersen,,\"long, quoted\"\n\
    Gentoo,Biscoe,NA,ok\n\
    Chinstrap,Dream,3800.0,ok\n\
    Gentoo,Biscoe,8000.0,ok\n";

fn penguins(folder: &Path, mass: &str) -> PathBuf {
    std::fs::write(folder.join("penguins.csv"), PENGUINS).unwrap();
    let toml = format!(
        "[table]\nname = \"penguins\"\nfile = \"penguins.csv\"\n\
         [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1.0\n\
         [columns.species]\ntype = \"text\"\ndomain = [\"Adelie\", \"Gentoo\"]\n\
         [columns.body_mass_g]\ntype = \"{mass}\"\nbounds = [2500, 6500]\n\
         [columns.note]\ntype = \"text\"\nmax_length = 4\n"
    );
    let path = folder.join("penguins.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

fn check(description: &Path) -> (Option<i32>, String, String) {
    let output = dpkit(&["check", "--description", description.to_str().unwrap()]);
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (
        output.status.code(),
        text(output.stdout),
        text(output.stderr),
    )
}

/// Issue 31's trap: a column of `3750.0` declared `integer` is all NULL to
/// every query, which answers and charges as if nothing were wrong. The
/// check names it, with the other facts the data breaks, and no value.
#[test]
fn a_wrong_type_and_every_broken_fact_are_counted_with_their_first_row() {
    let folder = folder("penguins");
    let (status, out, err) = check(&penguins(&folder, "integer"));
    assert_eq!((status, err.as_str()), (Some(3), ""), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with("penguins.csv: 5 rows, read as the description declares"));
    assert_eq!(
        &lines[1..4],
        [
            // The domain's longest value has 6 characters: 7 are kept.
            "  species      text     5 present; 1 outside the domain (never a group), first at row 4; \
             1 longer than 7 characters (cut), first at row 4",
            "  body_mass_g  integer  3 present; 3 not integer (read as NULL), first at row 1",
            "  note         text     5 present; 1 longer than 4 characters (cut), first at row 2",
        ]
    );
    assert!(lines[4].starts_with("the data holds values the description does not expect"));
    for value in ["Chinstrap", "3750", "8000", "quoted", "Dream"] {
        assert!(!out.contains(value), "the report quotes a value: {out}");
    }

    // Declared `real`, the masses read, and the bound is what remains.
    let (status, out, _) = check(&penguins(&folder, "real"));
    assert_eq!(status, Some(3));
    assert!(
        out.contains("  body_mass_g  real     3 present; 1 above 6500 (clamped), first at row 5\n"),
        "{out}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn data_as_described_passes_and_the_cap_is_counted_per_person() {
    let folder = folder("visits");
    std::fs::write(
        folder.join("visits.csv"),
        "person,cost\n1,10\n1,20\n1,30\n2,5\n,7\n3,40\n",
    )
    .unwrap();
    let toml = |max_rows: u32| {
        format!(
            "[table]\nname = \"visits\"\nfile = \"visits.csv\"\n\
             [privacy_unit]\nkind = \"id\"\ncolumn = \"person\"\nmax_rows_per_person = {max_rows}\n\
             [budget]\nepsilon = 1.0\n\
             [columns.person]\ntype = \"integer\"\n\
             [columns.cost]\ntype = \"integer\"\nbounds = [0, 50]\n"
        )
    };
    let path = folder.join("visits.toml");
    std::fs::write(&path, toml(2)).unwrap();
    let (status, out, _) = check(&path);
    assert_eq!(status, Some(3), "{out}");
    assert!(
        out.contains(
            "  privacy unit: 1 people with more than 2 rows (1 rows left out); \
             1 rows without an id (left out)\n"
        ),
        "{out}"
    );

    // Without the row that has no id, and with room for everyone's rows.
    std::fs::write(
        folder.join("visits.csv"),
        "person,cost\n1,10\n1,20\n1,30\n2,5\n3,40\n",
    )
    .unwrap();
    std::fs::write(&path, toml(3)).unwrap();
    let (status, out, _) = check(&path);
    assert_eq!(status, Some(0), "{out}");
    assert!(out.contains("  person  integer  5 present\n"), "{out}");
    assert!(
        out.ends_with("every value is as the description expects\n"),
        "{out}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn what_cannot_be_checked_gets_one_line() {
    let folder = folder("refusals");
    let sqlite = folder.join("db.toml");
    std::fs::write(
        &sqlite,
        "[table]\nname = \"t\"\nsqlite = \"t.sqlite\"\n[privacy_unit]\nkind = \"row\"\n\
         [budget]\nepsilon = 1.0\n",
    )
    .unwrap();
    let (status, out, err) = check(&sqlite);
    assert_eq!((status, out.as_str()), (Some(2), ""));
    assert_eq!(
        err,
        "dpkit: error: data description: dpkit check reads a CSV or Parquet file; \
         this table lives in a database\n"
    );
    let (status, _, err) = check(&folder.join("missing.toml"));
    assert_eq!(status, Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn every_private_table_is_checked_against_its_own_file() {
    // The bundled clinic: people as described, and about 3% of them with
    // more visits than the 12 kept.
    let clinic = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/clinic/clinic.toml");
    let (status, out, _) = check(&clinic);
    assert_eq!(status, Some(3), "{out}");
    let reports: Vec<&str> = out
        .split("rows, read as the description declares")
        .collect();
    assert_eq!(reports.len(), 3, "one report per private table: {out}");
    assert!(out.contains("people.csv: 3000 rows"), "{out}");
    assert!(out.contains("visits.csv: 11867 rows"), "{out}");
    assert!(out.contains("people with more than 12 rows"), "{out}");
}

#[test]
fn a_text_id_past_its_max_length_is_reported_as_no_ones() {
    let folder = folder("long-ids");
    std::fs::write(folder.join("t.csv"), "who,v\nalice,1\nbob,2\n").unwrap();
    let path = folder.join("t.toml");
    std::fs::write(
        &path,
        "[table]\nname = \"t\"\nfile = \"t.csv\"\n\
         [privacy_unit]\nkind = \"id\"\ncolumn = \"who\"\nmax_rows_per_person = 1\n\
         [budget]\nepsilon = 1.0\n[columns.who]\ntype = \"text\"\nmax_length = 3\n",
    )
    .unwrap();
    let (status, out, _) = check(&path);
    assert_eq!(status, Some(3), "{out}");
    assert!(
        out.contains("1 longer than 3 characters (no one's: left out), first at row 1"),
        "{out}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Penguins whose `sex` and `mass` mark missing values with `NA`, and
/// `year` with -999.
const MARKED: &str = "species,sex,mass,year\n\
    Adelie,male,3750,2007\n\
    Adelie,NA,NA,-999\n\
    Gentoo,female,5000,2008\n\
    Gentoo,,4800,2009\n\
    Chinstrap,NA,3500,2007\n";

fn marked(folder: &Path, missing: &str) -> String {
    std::fs::write(folder.join("marked.csv"), MARKED).unwrap();
    let toml = format!(
        "[table]\nname = \"p\"\nfile = \"marked.csv\"\n{missing}\n\
         [privacy_unit]\nkind = \"row\"\n[budget]\nepsilon = 1000.0\n\
         [columns.sex]\ntype = \"text\"\ndomain = [\"female\", \"male\"]\n\
         [columns.mass]\ntype = \"integer\"\nbounds = [2000, 7000]\n\
         [columns.year]\ntype = \"integer\"\nbounds = [2007, 2009]\n"
    );
    let path = folder.join(format!("marked{}.toml", missing.len()));
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_string()
}

/// One rule for every type (issue 67, point 6): the description's `missing`
/// markers are NULL in text and number columns alike, for queries and for
/// `dpkit check`; without them, `NA` is a value of a text column.
#[test]
fn declared_missing_markers_are_null_in_every_column() {
    let folder = folder("marked");
    let counts = |description: &str| {
        let ledger = folder.join(format!("{}.ledger", description.len()));
        let output = dpkit(&[
            "query",
            "--description",
            description,
            "--ledger",
            ledger.to_str().unwrap(),
            "--epsilon",
            "500",
            "--format",
            "csv",
            "SELECT COUNT(sex) AS s, COUNT(mass) AS m, COUNT(year) AS y FROM p",
        ]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let declared = marked(&folder, "missing = [\"\", \"NA\", \"-999\"]");
    // At ε = 500 a count's geometric noise is 0 but with probability e^-500.
    let answer = counts(&declared);
    assert!(
        answer
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("2,2,2,4,4,4,4,4,4"),
        "{answer}"
    );
    let checked = dpkit(&["check", "--description", &declared]);
    let said = String::from_utf8(checked.stdout).unwrap();
    assert_eq!(checked.status.code(), Some(0), "{said}");
    let line = |column: &str| {
        said.lines()
            .find(|l| l.trim_start().starts_with(&format!("{column} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("sex").ends_with(" 2 present"), "{said}");
    assert!(line("year").ends_with(" 4 present"), "{said}");
    // Without the markers, a text column's NA is a value (outside the domain).
    let plain = marked(&folder, "");
    let answer = counts(&plain);
    assert!(
        answer
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("4,4,4,4,4,4,5,5,5"),
        "{answer}"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Issue 67's walk: one row with more fields than the header made every
/// query on the file fail after its charge (an unnoised bit about the
/// person whose row it is), and `dpkit check` named neither the file nor
/// the row. Now such a row is no one's: queries answer without it, as on
/// the table without it, and the check counts it and names its row. A row
/// with fewer fields reads its missing fields as NULL.
#[test]
fn a_row_with_more_fields_than_the_header_is_no_ones_and_is_named() {
    let folder = folder("extra-fields");
    let description = penguins(&folder, "real");
    let toml = std::fs::read_to_string(&description).unwrap();
    std::fs::write(
        &description,
        toml.replace("epsilon = 1.0", "epsilon = 1000.0"),
    )
    .unwrap();
    let well_formed = PENGUINS.to_string() + "Gentoo,Biscoe\n";
    let longer = well_formed.clone() + "Adelie,Dream,4000.0,ok,SECRET_EXTRA,more\n";
    let count = |csv: &str, name: &str| {
        std::fs::write(folder.join("penguins.csv"), csv).unwrap();
        let ledger = folder.join(format!("{name}.sqlite"));
        let output = dpkit(&[
            "query",
            "--description",
            description.to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
            "--epsilon",
            "500",
            "--format",
            "csv",
            "SELECT COUNT(*) AS n FROM penguins",
        ]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let (without, with) = (count(&well_formed, "without"), count(&longer, "with"));
    assert!(without.starts_with("n,n_low,n_high\n6,"), "{without}");
    assert!(with.starts_with("n,n_low,n_high\n6,"), "{with}");
    std::fs::write(folder.join("penguins.csv"), &longer).unwrap();
    let (status, out, err) = check(&description);
    assert_eq!((status, err.as_str()), (Some(3), ""), "{out}");
    assert!(
        out.contains(
            "  1 row with more fields than the header (no one's: left out), first at row 7\n"
        ),
        "{out}"
    );
    assert!(!out.contains("SECRET"), "{out}");
    std::fs::remove_dir_all(&folder).unwrap();
}
