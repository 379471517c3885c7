//! The private step: noise on the exact per-group results, key selection,
//! post-processing and confidence intervals. Everything here runs in Rust on
//! the small result of the rewritten plan; the noise is planned in
//! [`crate::noise_plan`].

use std::collections::HashMap;

use dpkit_core::mechanism::EndChoice;
use rand_core::CryptoRng;

use dpkit_core::lattice::GridValue;

use crate::error::Result;
use crate::measured::{AggregateKind, KeySelection, MeasuredQuery, OutputColumn, QuantileRole};
use crate::noise_plan::Noise;
use crate::noise_plan::NoisePlan;
use crate::{Cell, ReleasedTable};

/// The exact result of the rewritten plan: keys and one value per measurement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExactGroups {
    /// One key per group (one string per GROUP BY column), each once.
    pub keys: Vec<Vec<String>>,
    /// `values[g][m]`: group g's measurement m, exactly: a count, or a sum
    /// in whole steps of its summation grid, of any size (NULL sums are 0;
    /// for a quantile's measurement, how many values it counted).
    pub values: Vec<Vec<GridValue>>,
    /// `histograms[g][m]`: group g's non-empty cells and their counts for a
    /// quantile's measurement m, by cell (empty for the others). Sparse, so
    /// that a group costs what its rows cost, not what the grid does.
    pub histograms: Vec<Vec<Histogram>>,
}

impl ExactGroups {
    /// The groups of `rows`, merged by key. Keys are what the answer
    /// prints: engine groups that print alike (+NaN and −NaN, say) are one
    /// key, and their measurements add up, so that no key is released twice.
    pub fn merged(rows: impl IntoIterator<Item = (Vec<String>, Vec<GridValue>)>) -> Self {
        Self::merged_with_histograms(
            rows.into_iter()
                .map(|(key, values)| (key, values, Vec::new())),
        )
    }

    /// As [`ExactGroups::merged`], with each row's per-cell counts (which
    /// add up cell by cell). Parts of a sum add up in whole grid steps, as
    /// the engine's own sums do: nothing is rounded on the way.
    pub fn merged_with_histograms(
        rows: impl IntoIterator<Item = (Vec<String>, Vec<GridValue>, Vec<Histogram>)>,
    ) -> Self {
        let mut merged = Self::default();
        let mut index: HashMap<Vec<String>, usize> = HashMap::new();
        for (key, values, histograms) in rows {
            #[cfg(feature = "planted-holes")]
            let key_seen = if dpkit_planted::is_planted(dpkit_planted::Hole::RepeatedKeys) {
                None
            } else {
                index.get(&key)
            };
            #[cfg(not(feature = "planted-holes"))]
            let key_seen = index.get(&key);
            match key_seen {
                Some(&at) => {
                    for (total, part) in merged.values[at].iter_mut().zip(values) {
                        *total = total.saturating_add(part);
                    }
                    // Put together here, put in order once at the end: a
                    // database sends a group's cells one row each.
                    for (total, counts) in merged.histograms[at].iter_mut().zip(histograms) {
                        total.extend_from_slice(&counts);
                    }
                }
                None => {
                    index.insert(key.clone(), merged.keys.len());
                    merged.keys.push(key);
                    merged.values.push(values);
                    merged.histograms.push(histograms);
                }
            }
        }
        for histograms in &mut merged.histograms {
            for cells in histograms {
                add_counts(cells, &[]);
            }
        }
        merged
    }
}

/// Non-empty cells of a grid and how many values each holds, by cell.
pub type Histogram = Vec<(usize, u64)>;

/// Adds `counts` into `total` cell by cell.
pub fn add_counts(total: &mut Histogram, counts: &[(usize, u64)]) {
    total.extend_from_slice(counts);
    total.sort_unstable_by_key(|&(cell, _)| cell);
    total.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = kept.1.saturating_add(later.1);
        }
        same
    });
}

/// One measurement's release: the noisy value, or the chosen cell's value
/// (its lower end, value or upper end by the choice's role).
fn released<R: CryptoRng + ?Sized>(
    noise: &Noise,
    value: GridValue,
    counts: &[(usize, u64)],
    rng: &mut R,
) -> Result<f64> {
    match noise {
        Noise::Additive(noise) => {
            #[cfg(feature = "planted-holes")]
            let value = planted_rounded_total(noise, value);
            Ok(noise.release_exact(value, rng)?)
        }
        Noise::Quantile {
            selection,
            grid,
            p,
            role,
            shift,
        } => {
            if role.is_bound(*p) {
                return Ok(match role {
                    QuantileRole::Lower => grid.lower_edge(0),
                    _ => grid.upper_edge(grid.cells - 1),
                });
            }
            let mut cells = vec![0u64; grid.cells];
            for &(cell, count) in counts {
                if let Some(slot) = cells.get_mut(cell) {
                    *slot = count;
                }
            }
            if *role == QuantileRole::Point {
                let cell = selection.select_with_rng(&cells, *p, *shift, rng)?;
                return Ok(grid.value(cell));
            }
            // An end may fall beyond every cell: on the public bound.
            let end = selection.select_end_with_rng(&cells, *p, *shift, rng)?;
            Ok(match (end, role) {
                (EndChoice::Below, _) => grid.lower_edge(0),
                (EndChoice::Above, _) => grid.upper_edge(grid.cells - 1),
                (EndChoice::Cell(cell), QuantileRole::Lower) => grid.lower_edge(cell),
                (EndChoice::Cell(cell), _) => grid.upper_edge(cell),
            })
        }
    }
}

/// The hole: a total rounded half away from zero for integer noise.
#[cfg(feature = "planted-holes")]
fn planted_rounded_total(
    noise: &dpkit_core::mechanism::AdditiveNoise,
    value: GridValue,
) -> GridValue {
    if dpkit_planted::is_planted(dpkit_planted::Hole::RoundedTotals) && noise.is_integer() {
        return GridValue::whole(value.to_f64().round() as i128);
    }
    value
}

/// Adds the noise to `exact`, selects keys and builds the answer.
pub fn release<R: CryptoRng + ?Sized>(
    query: &MeasuredQuery,
    plan: &NoisePlan,
    exact: &ExactGroups,
    confidence: f64,
    rng: &mut R,
) -> Result<ReleasedTable> {
    let by_key: HashMap<&Vec<String>, usize> =
        exact.keys.iter().enumerate().map(|(i, k)| (k, i)).collect();
    // (key, its group in `exact` if the data have it) of every candidate row.
    let candidates: Vec<(Vec<String>, Option<usize>)> = match &query.keys {
        KeySelection::Single => vec![(vec![], (!exact.keys.is_empty()).then_some(0))],
        KeySelection::Domain(cells) => cells
            .iter()
            .map(|cell| (cell.clone(), by_key.get(cell).copied()))
            .collect(),
        KeySelection::Threshold => {
            // Sorted keys: the order of the engine's result must not show through.
            let mut seen: Vec<(Vec<String>, Option<usize>)> = (0..exact.keys.len())
                .map(|i| (exact.keys[i].clone(), Some(i)))
                .collect();
            seen.sort_by(|a, b| a.0.cmp(&b.0));
            seen
        }
    };
    let mut rows = Vec::new();
    for (key, group) in candidates {
        let release_one = |m: usize, rng: &mut R| {
            let value = group
                .and_then(|g| exact.values[g].get(m).copied())
                .unwrap_or_default();
            let counts = group
                .and_then(|g| exact.histograms.get(g))
                .and_then(|h| h.get(m))
                .map_or(&[][..], Vec::as_slice);
            released(&plan.noises[m].noise, value, counts, rng)
        };
        // The threshold first: a key that does not pass costs nothing more,
        // so what one person's key adds to the time is one noisy count.
        let mut passed = None;
        if let (Some(index), Some(threshold)) = (query.threshold_measurement, plan.threshold) {
            let count = release_one(index, rng)?;
            if count < threshold {
                continue;
            }
            passed = Some((index, count));
        }
        let mut noisy = Vec::with_capacity(plan.noises.len());
        for m in 0..plan.noises.len() {
            noisy.push(match passed {
                Some((index, count)) if index == m => count,
                _ => release_one(m, rng)?,
            });
        }
        let cells: Vec<Cell> = (0..query.aggregates.len())
            .map(|a| {
                crate::post_processing::aggregate_cell(
                    query.count_ceiling,
                    &query.aggregates[a].kind,
                    &query.measurement_of[a],
                    &noisy,
                    plan,
                )
            })
            .collect();
        if !kept_by_having(query, &key, &cells) {
            continue;
        }
        let row: Vec<Cell> = query
            .outputs
            .iter()
            .map(|(_, output)| match *output {
                OutputColumn::Group(g) => Cell::Key(key[g].clone()),
                OutputColumn::Aggregate(a) => cells[a].clone(),
                OutputColumn::Combined(c) => query.combinations[c].cell(&cells),
            })
            .collect();
        rows.push(row);
    }
    for &(column, ascending) in query.order_by.iter().rev() {
        rows.sort_by(|a, b| {
            let ordering = compare_cells(&a[column], &b[column]);
            if ascending {
                ordering
            } else {
                ordering.reverse()
            }
        });
    }
    if let Some(limit) = query.limit {
        rows.truncate(limit);
    }
    let mut notes = answer_notes(query, plan);
    notes.extend(possibly_empty(query, &rows));
    Ok(ReleasedTable {
        columns: query.outputs.iter().map(|(name, _)| name.clone()).collect(),
        released: query
            .outputs
            .iter()
            .map(|(_, o)| matches!(o, OutputColumn::Aggregate(_) | OutputColumn::Combined(_)))
            .collect(),
        rows,
        confidence,
        epsilon: plan.cost.epsilon(),
        delta: plan.cost.delta(),
        notes,
    })
}

/// The most groups a note names as possibly empty; the rest are counted.
const NAMED_EMPTY: usize = 10;

/// With keys from a public domain (every key released, with rows or not),
/// the released groups whose row count's interval reaches 0: they may
/// hold no rows (issue 67: a public table's 1,440 airports, 12 of the
/// noisy top 50 without a flight). Read off the released intervals alone:
/// post-processing.
fn possibly_empty(query: &MeasuredQuery, rows: &[Vec<Cell>]) -> Option<String> {
    if !matches!(query.keys, KeySelection::Domain(_)) {
        return None;
    }
    let count = query.outputs.iter().position(|(_, output)| {
        matches!(output, OutputColumn::Aggregate(a)
            if matches!(query.aggregates[*a].kind, AggregateKind::CountRows | AggregateKind::CountPeople))
    })?;
    let keys: Vec<usize> = (query.outputs.iter().enumerate())
        .filter(|(_, (_, output))| matches!(output, OutputColumn::Group(_)))
        .map(|(i, _)| i)
        .collect();
    let empty: Vec<String> = rows
        .iter()
        .filter(|row| matches!(row[count], Cell::Value { low, .. } if low <= 0.0))
        .map(|row| {
            let key: Vec<String> = keys
                .iter()
                .map(|&k| match &row[k] {
                    Cell::Key(text) => text.clone(),
                    Cell::Value { value, .. } => value.to_string(),
                })
                .collect();
            key.join(" / ")
        })
        .collect();
    if empty.is_empty() {
        return None;
    }
    let named = empty
        .iter()
        .take(NAMED_EMPTY)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = match empty.len().saturating_sub(NAMED_EMPTY) {
        0 => String::new(),
        rest => format!(" and {rest} more"),
    };
    Some(format!(
        "every group of the public domain is released, with rows or not; these {} of the {} \
         shown may hold no rows (their `{}` interval reaches 0): {named}{more}",
        empty.len(),
        rows.len(),
        query.outputs[count].0
    ))
}

/// Whether HAVING, if any, holds for the released row (key and every
/// aggregate's released cell): post-processing of the noisy values.
fn kept_by_having(query: &MeasuredQuery, key: &[String], cells: &[Cell]) -> bool {
    let Some(having) = &query.having else {
        return true;
    };
    let values: Vec<f64> = cells
        .iter()
        .map(|cell| match cell {
            Cell::Value { value, .. } => *value,
            Cell::Key(_) => f64::NAN,
        })
        .collect();
    having.holds(key, &values) == Some(true)
}

/// The query's notes and, with thresholded keys, what the threshold
/// withholds: said of every such answer, whether or not a group was
/// withheld (which depends on the data and is not said).
pub(crate) fn answer_notes(query: &MeasuredQuery, plan: &NoisePlan) -> Vec<String> {
    let mut notes = query.notes.clone();
    if let (KeySelection::Threshold, Some(threshold)) = (&query.keys, plan.threshold) {
        notes.push(format!(
            "groups are shown only when their noisy row count reaches {threshold}, so a group \
             of few people may be missing (a public domain for the key would list every group)"
        ));
    }
    notes
}

fn compare_cells(a: &Cell, b: &Cell) -> std::cmp::Ordering {
    match (a, b) {
        (Cell::Key(x), Cell::Key(y)) => match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(p), Ok(q)) => p.total_cmp(&q),
            _ => x.cmp(y),
        },
        (Cell::Value { value: x, .. }, Cell::Value { value: y, .. }) => x.total_cmp(y),
        (Cell::Key(_), _) => std::cmp::Ordering::Less,
        _ => std::cmp::Ordering::Greater,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::having::{Comparison, Condition, Term};
    use crate::measured::{AggregateKind, AggregateRequest, Measurement};
    use crate::{ReleaseSettings, plan_noise};
    use dpkit_core::rng::InsecureSeededRng;

    /// `SELECT k, COUNT(*) AS n … GROUP BY k HAVING COUNT(*) > 1000` over
    /// one group of exactly 1000 rows, at ε = 1.
    fn having_query() -> MeasuredQuery {
        MeasuredQuery {
            sql: String::new(),
            group_names: vec!["k".into()],
            aggregates: vec![AggregateRequest {
                name: "n".into(),
                kind: AggregateKind::CountRows,
            }],
            outputs: vec![
                ("k".into(), OutputColumn::Group(0)),
                ("n".into(), OutputColumn::Aggregate(0)),
            ],
            measurements: vec![Measurement::Count],
            measurement_of: vec![vec![0]],
            threshold_measurement: None,
            keys: KeySelection::Domain(vec![vec!["a".into()]]),
            having: Some(Condition::Compare(
                Term::Aggregate(0),
                Comparison::Greater,
                Term::Number(1000.0),
            )),
            order_by: vec![],
            limit: None,
            contribution: dpkit_core::sensitivity::Contribution::rows(1),
            joins: Vec::new(),
            combinations: Vec::new(),
            neighbouring: dpkit_core::sensitivity::Neighbouring::AddRemove,
            count_ceiling: None,
            notes: vec![],
        }
    }

    /// HAVING reads the noisy count, never the exact one: a group of exactly
    /// 1000 rows is kept about a quarter of the time under `> 1000`, and every kept
    /// row shows a count above 1000. Compared on the exact count, it would
    /// never be kept (and its presence would tell the exact count's side).
    #[test]
    fn having_keeps_rows_on_their_released_values_only() {
        let query = having_query();
        let settings = ReleaseSettings {
            epsilon: 1.0,
            delta: 0.0,
            mechanism: Default::default(),
            confidence: 0.95,
        };
        let noise = plan_noise(&query, &settings).unwrap();
        let exact = ExactGroups::merged([(vec!["a".to_string()], vec![GridValue::whole(1000)])]);
        let mut rng = InsecureSeededRng::from_seed_for_testing(21);
        let mut kept = 0;
        for _ in 0..2000 {
            let answer = release(&query, &noise, &exact, 0.95, &mut rng).unwrap();
            for row in &answer.rows {
                let Cell::Value { value, .. } = row[1] else {
                    panic!("a count")
                };
                assert!(value > 1000.0, "kept with {value}");
                kept += 1;
            }
        }
        // P(noise > 0) for the two-sided geometric at ε = 1 is
        // e^-1/(1 + e^-1) = 0.269; over 2000 runs that is 538 ± 20 (σ),
        // and 300..800 is more than 11σ either way.
        assert!((300..800).contains(&kept), "kept {kept} of 2000");
    }

    /// Parts of one exact sum add up in whole grid steps, past 2^53 and
    /// in any order: in floating point, 2^53 − 1 and 2 would round to 2^53
    /// before −3 is added.
    #[test]
    fn parts_of_exact_sums_add_up_exactly() {
        let big = 1i128 << 53;
        for exponent in [0, -30, 12] {
            let row = |steps: i128, count: i128| {
                (
                    vec!["k".to_string()],
                    vec![GridValue::new(steps, exponent), GridValue::whole(count)],
                )
            };
            let merged = ExactGroups::merged([row(big - 1, 1), row(2, 2), row(-3, 3)]);
            let expected = vec![GridValue::new(big - 2, exponent), GridValue::whole(6)];
            assert_eq!(merged.values, [expected]);
            let over = ExactGroups::merged([row(big, 0), row(big, 0), row(-big, 0)]);
            assert_eq!(over.values[0][0], GridValue::new(big, exponent));
        }
    }
}
