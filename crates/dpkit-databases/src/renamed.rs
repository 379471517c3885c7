//! Step 3 of [`super::sql`]: every name the analyst wrote (a subquery's
//! alias, a computed column's name) is sent as a name dpkit made.
//!
//! The analyst's names are text that reaches the database, and a database
//! reads names in its own way: SQLite and Spark find a name whatever its
//! case, PostgreSQL cuts it at 63 bytes, Spark substitutes `${…}` in it,
//! and a quote inside one prints as the pair it would be read back from.
//! Renamed, none of that can happen to them: the statement sent holds only
//! the description's names (the table and its columns, which the curator
//! chose), dpkit's own (`__dpkit_…`), and names made here, `__dpkit_n1`,
//! `__dpkit_n2`, … (none equal, in any case, to a name already there).
//!
//! The renaming is a one-to-one map of names applied to every place a
//! name is written, so it cannot change what the statement means; that it
//! reached every place is checked on the printed text, and a statement
//! where it did not is refused, free.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use super::flavour::Flavour;
use super::spelling::dialect;
use crate::error::{DatabaseError, Result};

/// The prefix of dpkit's own names, kept as they are.
const OWN: &str = "__dpkit_";

/// Refuses, free, a query that writes a name of dpkit's own (`__dpkit_…`,
/// in any case): names with that prefix are sent as they are, so the
/// analyst may not write one.
pub fn no_own_names(sql: &str) -> Result<()> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| DatabaseError::Sql(e.to_string()))?;
    let own = |token: &Token| match token {
        Token::Word(word) => word.value.to_lowercase().starts_with(OWN),
        _ => false,
    };
    match tokens.iter().any(own) {
        true => Err(DatabaseError::NotPrivate(format!(
            "names beginning with {OWN} are dpkit's own: rename it"
        ))),
        false => Ok(()),
    }
}

/// Renames in `statement` every quoted name other than `kept` (the
/// description's table and columns, and the raw table's name) and dpkit's
/// own. It runs before anything is printed and read back (the spellings
/// print their arguments): printed, `a""b` reads back as `a"b`, so two
/// of the analyst's names could become one.
pub(crate) fn rename(statement: &mut ast::Statement, kept: &HashSet<String>) {
    let mut written = HashSet::new();
    let _ = ast::VisitMut::visit(
        statement,
        &mut Names(|ident: &mut ast::Ident| {
            written.insert(ident.value.clone());
        }),
    );
    let map = made_names(&written, kept);
    let _ = ast::VisitMut::visit(
        statement,
        &mut Names(|ident: &mut ast::Ident| {
            if let Some(made) = map.get(&ident.value) {
                ident.value = made.clone();
            }
        }),
    );
}

/// A made name for each written name that is not kept, none equal (in any
/// case) to a written name.
fn made_names(written: &HashSet<String>, kept: &HashSet<String>) -> HashMap<String, String> {
    let taken: HashSet<String> = written.iter().map(|n| n.to_lowercase()).collect();
    let mut sorted: Vec<&String> = written.iter().filter(|n| !is_kept(n, kept)).collect();
    sorted.sort();
    let mut made = (1..)
        .map(|i| format!("{OWN}n{i}"))
        .filter(|n| !taken.contains(n));
    sorted
        .into_iter()
        .map(|name| (name.clone(), made.next().expect("an endless supply")))
        .collect()
}

fn is_kept(name: &str, kept: &HashSet<String>) -> bool {
    kept.contains(name) || name.starts_with(OWN)
}

/// The check that the renaming reached every place a name is written: the
/// statement as printed holds no quoted name but kept ones and dpkit's
/// (made names are dpkit's). A place the renaming missed would still hold
/// the analyst's name, and the statement is refused. (The printed text is
/// read, not the tree, because the text is what is sent.)
pub(crate) fn renamed_everywhere(
    sent: &str,
    kept: &HashSet<String>,
    flavour: Flavour,
) -> Result<()> {
    let refused = || {
        DatabaseError::NotPrivate(format!(
            "the SQL for {} could not be written with dpkit's own names: it cannot be sent",
            flavour.name()
        ))
    };
    let tokens = Tokenizer::new(dialect(flavour), sent)
        .tokenize()
        .map_err(|_| refused())?;
    let foreign = |token: &Token| match token {
        Token::Word(word) => word.quote_style.is_some() && !is_kept(&word.value, kept),
        _ => false,
    };
    match tokens.iter().any(foreign) {
        true => Err(refused()),
        false => Ok(()),
    }
}

/// One pass over every place the unparser writes a name, handing each
/// quoted one to the closure (which collects or renames them).
struct Names<F: FnMut(&mut ast::Ident)>(F);

impl<F: FnMut(&mut ast::Ident)> Names<F> {
    fn name(&mut self, ident: &mut ast::Ident) {
        if ident.quote_style.is_some() {
            (self.0)(ident);
        }
    }

    fn object(&mut self, name: &mut ast::ObjectName) {
        for part in &mut name.0 {
            if let ast::ObjectNamePart::Identifier(ident) = part {
                self.name(ident);
            }
        }
    }

    fn alias(&mut self, alias: &mut ast::TableAlias) {
        self.name(&mut alias.name);
        for column in &mut alias.columns {
            self.name(&mut column.name);
        }
    }
}

impl<F: FnMut(&mut ast::Ident)> ast::VisitorMut for Names<F> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let Some(with) = &mut query.with {
            for table in &mut with.cte_tables {
                self.alias(&mut table.alias);
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
        for item in &mut select.projection {
            match item {
                ast::SelectItem::ExprWithAlias { alias, .. } => self.name(alias),
                ast::SelectItem::QualifiedWildcard(
                    ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                    _,
                ) => self.object(name),
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut ast::TableFactor) -> ControlFlow<()> {
        match factor {
            ast::TableFactor::Table { name, alias, .. } => {
                self.object(name);
                if let Some(alias) = alias {
                    self.alias(alias);
                }
            }
            ast::TableFactor::Derived {
                alias: Some(alias), ..
            } => self.alias(alias),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        match expr {
            ast::Expr::Identifier(ident) => self.name(ident),
            ast::Expr::CompoundIdentifier(idents) => idents.iter_mut().for_each(|i| self.name(i)),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::parser::Parser;

    fn renamed(sql: &str, kept: &[&str]) -> Result<String> {
        let dialect = dialect(Flavour::Postgres);
        let mut statement = Parser::parse_sql(dialect, sql).unwrap().remove(0);
        let kept = kept.iter().map(|k| k.to_string()).collect();
        rename(&mut statement, &kept);
        let sent = statement.to_string();
        renamed_everywhere(&sent, &kept, Flavour::Postgres).map(|()| sent)
    }

    #[test]
    fn every_alias_is_one_made_name_and_the_description_names_stay() {
        let sent = renamed(
            r#"WITH "w" ("c") AS (SELECT "v" AS "c" FROM "people")
               SELECT "s"."a b" AS "__dpkit_measure_0", "s".* FROM
               (SELECT "w"."c" AS "a b" FROM "w" AS "t" ("c")) AS "s"
               WHERE "s"."a b" > 1 GROUP BY "s"."a b" ORDER BY "s"."a b""#,
            &["people", "v"],
        )
        .unwrap();
        assert_eq!(
            sent,
            r#"WITH "__dpkit_n5" ("__dpkit_n2") AS (SELECT "v" AS "__dpkit_n2" FROM "people") SELECT "__dpkit_n3"."__dpkit_n1" AS "__dpkit_measure_0", "__dpkit_n3".* FROM (SELECT "__dpkit_n5"."__dpkit_n2" AS "__dpkit_n1" FROM "__dpkit_n5" AS "__dpkit_n4" ("__dpkit_n2")) AS "__dpkit_n3" WHERE "__dpkit_n3"."__dpkit_n1" > 1 GROUP BY "__dpkit_n3"."__dpkit_n1" ORDER BY "__dpkit_n3"."__dpkit_n1""#
        );
    }

    #[test]
    fn made_names_are_none_already_written_in_any_case() {
        let sent = renamed(
            r#"SELECT "a" AS "__dpkit_n1", "b" AS "__DPKIT_N2" FROM "people""#,
            &["people"],
        )
        .unwrap();
        assert_eq!(
            sent,
            r#"SELECT "__dpkit_n4" AS "__dpkit_n1", "__dpkit_n5" AS "__dpkit_n3" FROM "people""#
        );
    }

    #[test]
    fn a_name_left_unrenamed_is_refused() {
        let kept = ["people".to_string()].into_iter().collect();
        let sent = r#"SELECT "__dpkit_n1" FROM "people" WHERE "a" > 1"#;
        assert!(renamed_everywhere(sent, &kept, Flavour::Postgres).is_err());
        let whole = r#"SELECT "__dpkit_n1" FROM "people" WHERE "__dpkit_n1" > 1"#;
        assert!(renamed_everywhere(whole, &kept, Flavour::Postgres).is_ok());
    }
}
