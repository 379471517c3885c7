//! `dpkit describe` of several files: one draft in which the table holding
//! the people is the description's table, the other files that name a
//! person are its private tables and the rest are public tables. Each role
//! is guessed from the headers and the first rows, and marked for the
//! curator to confirm; bounds and domains are left as comments, as for one
//! file.

use std::path::Path;

use super::{Drafted, column_blocks, drafted_kind, first_rows, missing_line, table_name};
use crate::error::{QueryError, Result};

/// One file as the draft sees it.
struct File<'a> {
    path: &'a Path,
    table: String,
    names: Vec<String>,
    kinds: Vec<Drafted>,
    /// Whether the person column's values in the first rows are all
    /// present and distinct (one row per person).
    one_per_person: bool,
    /// How many first rows were read.
    rows: usize,
}

/// A draft description of several CSV files about the same people, the
/// person named by `person` (or guessed: a column of that name in two files
/// or more, whose values in the first rows of one of them are distinct).
///
/// ```no_run
/// use std::path::Path;
/// let draft = dpkit_query::draft::draft_from_csvs(
///     &[Path::new("planes.csv"), Path::new("flights.csv"), Path::new("airlines.csv")],
///     Some("tailnum"),
/// ).unwrap();
/// assert!(draft.contains("[private.flights]") && draft.contains("[public.airlines]"));
/// ```
pub fn draft_from_csvs(paths: &[&Path], person: Option<&str>) -> Result<String> {
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        files.push(read(path)?);
    }
    let person = match person {
        Some(person) => person.to_string(),
        None => guessed_person(&files)?,
    };
    let holding: Vec<usize> = (0..files.len())
        .filter(|&f| files[f].names.contains(&person))
        .collect();
    let Some(&first) = holding.first() else {
        return Err(QueryError::Description(format!(
            "no file has a column named {person}: name the column that says whose row it is \
             with --person"
        )));
    };
    for file in &mut files {
        file.one_per_person = distinct(file, &person)?;
    }
    let main = holding
        .iter()
        .copied()
        .find(|&f| files[f].one_per_person)
        .unwrap_or(first);
    let through = (0..files.len())
        .map(|f| reached_through(&files, f, &person))
        .collect::<Result<Vec<_>>>()?;
    Ok(draft(&files, main, &person, &through))
}

/// For a file without the person's column, the first of its columns that
/// is a key of a file with it (present and distinct in that file's first
/// rows, and this file no shorter there), as `(that file's table, the
/// column)`: its rows then name rows of a person (a visit's
/// prescriptions), so it is not public, and it cannot be private without
/// the person's column. A column that repeats in the file with the person
/// (a flight's carrier), or a shorter file (fewer airlines than flights
/// read), names a public lookup.
fn reached_through(files: &[File<'_>], f: usize, person: &str) -> Result<Option<(String, String)>> {
    let file = &files[f];
    if file.names.iter().any(|n| n == person) {
        return Ok(None);
    }
    for column in &file.names {
        for other in files.iter().filter(|o| o.names.iter().any(|n| n == person)) {
            if other.names.contains(column) && file.rows >= other.rows && distinct(other, column)? {
                return Ok(Some((other.table.clone(), column.clone())));
            }
        }
    }
    Ok(None)
}

/// The file's header, its columns' drafted types, and its table name.
fn read(path: &Path) -> Result<File<'_>> {
    let names = super::header(path)?;
    let (kinds, rows) = match first_rows(path, &names)? {
        Some(batch) => (
            batch.columns().iter().map(drafted_kind).collect(),
            batch.num_rows(),
        ),
        None => (Vec::new(), 0),
    };
    let kinds = if kinds.is_empty() {
        names.iter().map(|_| Drafted::text()).collect()
    } else {
        kinds
    };
    Ok(File {
        path,
        table: table_name(path),
        names,
        kinds,
        one_per_person: false,
        rows,
    })
}

/// Whether `column`'s values in the file's first rows are present and
/// distinct.
fn distinct(file: &File<'_>, column: &str) -> Result<bool> {
    use datafusion::arrow::array::AsArray;
    let Some(index) = file.names.iter().position(|n| n == column) else {
        return Ok(false);
    };
    let Some(batch) = first_rows(file.path, &file.names)? else {
        return Ok(false);
    };
    let values = batch.column(index).as_string::<i32>();
    let mut seen = std::collections::HashSet::new();
    Ok(values
        .iter()
        .all(|v| v.is_some_and(|v| !v.is_empty() && seen.insert(v))))
}

/// A column named alike in two files or more, distinct in one of them;
/// of several, one whose name reads like an identifier (`id`, `…_id`,
/// `…num`, `…key`), then the one in the most files, then the first.
fn guessed_person(files: &[File<'_>]) -> Result<String> {
    let in_files = |name: &String| files.iter().filter(|f| f.names.contains(name)).count();
    let mut candidates: Vec<(bool, usize, String)> = Vec::new();
    for file in files {
        for name in file.names.iter().filter(|n| in_files(n) >= 2) {
            if !candidates.iter().any(|(_, _, c)| c == name) && distinct(file, name)? {
                candidates.push((identifier_like(name), in_files(name), name.clone()));
            }
        }
    }
    // The first of the best: a stable maximum.
    let best = candidates
        .iter()
        .rev()
        .max_by_key(|(like, count, _)| (*like, *count))
        .map(|(_, _, name)| name.clone());
    best.ok_or_else(|| {
        QueryError::Description(
            "no column named alike in two files has distinct values in one of them: name the \
             column that says whose row it is with --person"
                .into(),
        )
    })
}

/// Whether a column's name reads like an identifier.
fn identifier_like(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "id"
        || ["_id", "id_", "num", "key", "code"]
            .iter()
            .any(|part| name.contains(part))
        || name.ends_with("id")
}

/// The draft: `files[main]` as the table, the others as private or public,
/// or left out with the reason when they reach the person `through`
/// another table.
fn draft(
    files: &[File<'_>],
    main: usize,
    person: &str,
    through: &[Option<(String, String)>],
) -> String {
    let listed: Vec<String> = files.iter().map(|f| file_name(f.path)).collect();
    let names: Vec<String> = files.iter().flat_map(|f| f.names.clone()).collect();
    let kinds: Vec<Drafted> = files.iter().flat_map(|f| f.kinds.iter().cloned()).collect();
    let table = &files[main];
    let rows = if table.one_per_person {
        format!(
            "# GUESSED: {person} names the person ({} holds one row each in its first rows).\n\
             # Confirm, or set the column that says whose row it is.\n\
             [privacy_unit]\nkind = \"id\"\ncolumn = \"{person}\"\nmax_rows_per_person = 1\n",
            file_name(table.path)
        )
    } else {
        format!(
            "# GUESSED: {person} names the person, who may hold several rows of {}: set\n\
             # max_rows_per_person from public knowledge, never from the data.\n\
             [privacy_unit]\nkind = \"id\"\ncolumn = \"{person}\"\nmax_rows_per_person = 10\n",
            file_name(table.path)
        )
    };
    let mut draft = format!(
        "# Drafted by `dpkit describe` from the headers and first rows of {}.\n\
         # Fill in what is PUBLIC knowledge: bounds and domains must not come from the data.\n\
         # The roles of the tables are GUESSED: confirm each marked line.\n\
         # Then `dpkit check --description <this file>` reads the data against it.\n\n\
         [table]\nname = \"{}\"\nfile = \"{}\"\n{}\n{rows}\n\
         # Each analyst's total privacy budget.\n[budget]\nepsilon = 1.0\ndelta = 1e-6\n",
        listed.join(", "),
        table.table,
        file_name(table.path),
        missing_line(&names, &kinds),
    );
    draft.push_str(&column_blocks("columns", &table.names, &table.kinds));
    for (f, file) in files.iter().enumerate().filter(|(f, _)| *f != main) {
        let name = &file.table;
        let path = &listed[f];
        if file.names.iter().any(|n| n == person) {
            draft.push_str(&format!(
                "\n# GUESSED private: its rows name a person ({person}). Set max_rows_per_person\n\
                 # from public knowledge: the most rows of one person that enter an aggregate.\n\
                 [private.{name}]\nfile = \"{path}\"\nperson = \"{person}\"\n\
                 max_rows_per_person = 10\n"
            ));
            draft.push_str(&column_blocks(
                &format!("private.{name}.columns"),
                &file.names,
                &file.kinds,
            ));
        } else if let Some((table, key)) = &through[f] {
            draft.push_str(&format!(
                "\n# LEFT OUT: {path} names rows of {table} by {key} (distinct there in the\n\
                 # first rows), so its rows are about people and it is not public. A private\n\
                 # table needs its person's column: add {table}'s {person} to each of its rows\n\
                 # (joined on {key}) and describe the files again.\n"
            ));
        } else {
            draft.push_str(&format!(
                "\n# GUESSED public: no column names a person. Confirm it holds nothing\n\
                 # private: anyone may read a public table's rows.\n\
                 [public.{name}]\nfile = \"{path}\"\n"
            ));
            for (column, drafted) in file.names.iter().zip(&file.kinds) {
                draft.push_str(&format!(
                    "\n[public.{name}.columns.{}]\ntype = \"{}\"\n",
                    super::toml_key(column),
                    drafted.kind.name()
                ));
            }
        }
    }
    draft
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpkit_description::{Description, PrivacyUnit};

    /// Planes (one row each), their flights (several each) and airlines
    /// (no plane): the person guessed, each table in its role, and the
    /// draft a description that parses.
    #[test]
    fn several_files_draft_one_description_with_each_table_in_its_role() {
        let folder =
            std::env::temp_dir().join(format!("dpkit-draft-several-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let write = |name: &str, text: &str| {
            let path = folder.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let flights = write(
            "flights.csv",
            "tailnum,carrier,delay\nN1,AA,5\nN1,UA,NA\nN2,AA,-3\n",
        );
        let planes = write("planes.csv", "tailnum,year\nN1,2001\nN2,1999\n");
        let airlines = write("airlines.csv", "carrier,name\nAA,American\nUA,United\n");
        let draft = draft_from_csvs(&[&flights, &planes, &airlines], None).unwrap();
        assert!(
            draft.contains("# GUESSED: tailnum names the person (planes.csv"),
            "{draft}"
        );
        let description = Description::from_toml(&draft, &folder).unwrap();
        assert_eq!(description.table, "planes");
        assert_eq!(
            description.privacy_unit,
            PrivacyUnit::Id {
                column: "tailnum".into(),
                max_rows: 1
            }
        );
        assert_eq!(description.private["flights"].person, "tailnum");
        assert!(description.public.contains_key("airlines"));
        assert_eq!(description.missing, ["", "NA"]);
        // Named: the same roles; a name no file has is refused in one line.
        let named = draft_from_csvs(&[&planes, &flights, &airlines], Some("tailnum")).unwrap();
        assert!(Description::from_toml(&named, &folder).is_ok());
        // A file that names flights, not planes, is left out, never public.
        let delays = write("delays.csv", "flight,minutes\nF2,4\nF1,7\nF2,9\n");
        let numbered = write(
            "numbered.csv",
            "flight,tailnum,carrier\nF1,N1,AA\nF2,N1,UA\nF3,N2,AA\n",
        );
        let draft = draft_from_csvs(&[&planes, &numbered, &delays, &airlines], None).unwrap();
        assert!(
            draft.contains("# LEFT OUT: delays.csv names rows of numbered by flight"),
            "{draft}"
        );
        let description = Description::from_toml(&draft, &folder).unwrap();
        assert!(!description.public.contains_key("delays"), "{draft}");
        assert!(!description.private.contains_key("delays"), "{draft}");
        assert!(description.public.contains_key("airlines"), "{draft}");
        assert_eq!(description.private["numbered"].person, "tailnum");
        let refused = draft_from_csvs(&[&planes, &flights], Some("plane")).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("no file has a column named plane")
        );
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
