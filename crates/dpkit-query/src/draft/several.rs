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
    let through = reached_through(&files, &person)?;
    Ok(draft(&files, main, &person, &through))
}

/// For each file without the person's column, the first of its columns
/// that names rows of a file about people, as `(that file's table, the
/// column)`: a column of the same name that is a key there (present and
/// distinct in its first rows), and either named like an identifier
/// (`visit_id`, `order_no`…) or sharing a value with it in the first rows
/// (`visit`). Its rows then name rows of a person (a visit's
/// prescriptions), so it is not public, and it cannot be private without
/// the person's column. Files about people are those with the person's
/// column and, in turn, those found here (an order's items' shipments). A
/// key that repeats in the file about people (a flight's carrier) names a
/// public lookup. When the rows read cannot tell (two flights of two
/// carriers), the file is left out: a guess errs towards privacy.
fn reached_through(files: &[File<'_>], person: &str) -> Result<Vec<Option<(String, String)>>> {
    let mut through: Vec<Option<(String, String)>> = vec![None; files.len()];
    let about_people = |f: usize, through: &[Option<(String, String)>]| {
        files[f].names.iter().any(|n| n == person) || through[f].is_some()
    };
    loop {
        let mut found = false;
        for f in 0..files.len() {
            if about_people(f, &through) {
                continue;
            }
            'columns: for column in &files[f].names {
                for (o, other) in files.iter().enumerate() {
                    if o != f
                        && about_people(o, &through)
                        && other.names.contains(column)
                        && distinct(other, column)?
                        && (identifier_like(column) || shared(&files[f], other, column)?)
                    {
                        through[f] = Some((other.table.clone(), column.clone()));
                        found = true;
                        break 'columns;
                    }
                }
            }
        }
        if !found {
            return Ok(through);
        }
    }
}

/// The file's header, its columns' drafted types, and its table name.
fn read(path: &Path) -> Result<File<'_>> {
    let names = super::header(path)?;
    let kinds = match first_rows(path, &names)? {
        Some(batch) => batch.columns().iter().map(drafted_kind).collect(),
        None => Vec::new(),
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
    })
}

/// `column`'s values in the file's first rows, as text (`None` when the
/// file has no such column or no rows).
fn first_values(file: &File<'_>, column: &str) -> Result<Option<Vec<Option<String>>>> {
    use datafusion::arrow::array::AsArray;
    let Some(index) = file.names.iter().position(|n| n == column) else {
        return Ok(None);
    };
    let Some(batch) = first_rows(file.path, &file.names)? else {
        return Ok(None);
    };
    let values = batch.column(index).as_string::<i32>();
    Ok(Some(values.iter().map(|v| v.map(str::to_string)).collect()))
}

/// Whether `column`'s values in the file's first rows are present and
/// distinct.
fn distinct(file: &File<'_>, column: &str) -> Result<bool> {
    let Some(values) = first_values(file, column)? else {
        return Ok(false);
    };
    let mut seen = std::collections::HashSet::new();
    Ok(values
        .iter()
        .all(|v| v.as_ref().is_some_and(|v| !v.is_empty() && seen.insert(v))))
}

/// Whether `column` holds a value in `file`'s first rows that it also
/// holds in `other`'s.
fn shared(file: &File<'_>, other: &File<'_>, column: &str) -> Result<bool> {
    let theirs = values(other, column)?;
    Ok(values(file, column)?.iter().any(|v| theirs.contains(v)))
}

/// `column`'s non-empty values in the file's first rows.
fn values(file: &File<'_>, column: &str) -> Result<std::collections::HashSet<String>> {
    let values = first_values(file, column)?.unwrap_or_default();
    Ok(values
        .into_iter()
        .flatten()
        .filter(|v| !v.is_empty())
        .collect())
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
                 # table needs its person's column: add {person} to each of its rows (through\n\
                 # {table}, joined on {key}) and describe the files again.\n"
            ));
        } else {
            draft.push_str(&format!(
                "\n# GUESSED public: no column names a person or a key of their rows. Confirm\n\
                 # it holds nothing private (a key named unlike its table's is not seen):\n\
                 # anyone may read a public table's rows.\n\
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
        // A file that names flights, not planes, is left out, never public,
        // and so is one that names those rows in turn; a lookup whose key
        // repeats among the flights, or a column that is no key, is public.
        let numbered = write(
            "numbered.csv",
            "flight_id,tailnum,carrier_code,model\nF1,N1,AA,x1\nF2,N1,UA,x2\nF3,N2,AA,x3\n",
        );
        let delays = write(
            "delays.csv",
            "delay_id,flight_id,minutes\nD1,F2,4\nD2,F1,7\nD3,F2,9\n",
        );
        let notes = write("notes.csv", "delay_id,text\nD1,late crew\n");
        let fixes = write("fixes.csv", "model,part\nx2,flap\n");
        let carriers = write("carriers.csv", "carrier_code,name\nAA,American\n");
        let models = write("models.csv", "model,seats\nx9,180\n");
        let files: [&Path; 7] = [
            &planes, &numbered, &delays, &notes, &carriers, &models, &fixes,
        ];
        let draft = draft_from_csvs(&files, Some("tailnum")).unwrap();
        for left_out in [
            "# LEFT OUT: delays.csv names rows of numbered by flight_id",
            "# LEFT OUT: notes.csv names rows of delays by delay_id",
            "# LEFT OUT: fixes.csv names rows of numbered by model",
        ] {
            assert!(draft.contains(left_out), "{left_out} in {draft}");
        }
        let description = Description::from_toml(&draft, &folder).unwrap();
        for table in ["delays", "notes"] {
            assert!(!description.public.contains_key(table), "{draft}");
            assert!(!description.private.contains_key(table), "{draft}");
        }
        assert!(description.public.contains_key("carriers"), "{draft}");
        assert!(description.public.contains_key("models"), "{draft}");
        assert_eq!(description.private["numbered"].person, "tailnum");
        // Two flights of two carriers cannot tell a lookup from a child:
        // left out.
        let two = write("two.csv", "tailnum,carrier_code\nN1,AA\nN1,UA\n");
        let draft = draft_from_csvs(&[&planes, &two, &carriers], Some("tailnum")).unwrap();
        assert!(draft.contains("# LEFT OUT: carriers.csv"), "{draft}");
        let refused = draft_from_csvs(&[&planes, &flights], Some("plane")).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("no file has a column named plane")
        );
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
