//! `dpkit_exact_sum(x)`: a sum with no rounding error, so that one person
//! moves it by exactly what the sensitivity says.
//!
//! A floating-point sum rounds after every addition, and the rounding
//! depends on the other values and on the order: crafted magnitudes near
//! 2^40 can move a computed sum by several grid steps more than one clamped
//! value could. Here every (already clamped) value is first rounded to a
//! public grid of spacing `g = 2^k` (exact: a power-of-two scaling), and the
//! grid indices are added in 128-bit integers, which is exact and does not
//! depend on the order. The planner rounds the bounds out to multiples of
//! `g` (dpkit-query's `plan::grid`), so a rounded value stays within them
//! and one row moves the sum by at most `max(|L|, |U|)`.
//!
//! The sum leaves the engine as what it is, a whole number of steps
//! (`Decimal128(38, 0)`), and is released from there in integers
//! (`dpkit_core::lattice::GridValue`): a row adds at most 2^63 steps, so
//! no group of fewer than 2^63 rows can reach the ends of 128 bits, and no
//! total is ever rounded or saturated before its noise.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Float64Array, Int64Array, StructArray,
};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Field, FieldRef, Fields, Float64Type, Int64Type,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, AggregateFunctionParams};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, Expr, GroupsAccumulator, Signature,
    Volatility, udaf_default_display_name, udaf_default_human_display, udaf_default_schema_name,
};

use crate::clamp::Clamp;

#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ExactSum {
    rule: Steps,
    /// Whether it also counts its values and returns both
    /// ([`crate::sum_and_count`]).
    counts: bool,
    signature: Signature,
}

/// How one row's value becomes grid steps: clamped and centred first when
/// the sum does its argument's clamp in its own pass (see [`fused`]), then
/// rounded to the grid `2^exponent`.
///
/// ```
/// use dpkit_functions::clamp::Clamp;
/// use dpkit_functions::exact_sum::Steps;
/// let halves = Steps::clamped(-1, Clamp { low: 0.0, high: 10.0, centre: 5.0 });
/// assert_eq!(halves.of(12.0), 10); // (10 − 5) / 0.5
/// assert_eq!(Steps::plain(-1).of(12.0), 24);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    exponent: i32,
    clamp: Option<Clamp>,
    /// 2^-exponent.
    inverse: f64,
}

impl Steps {
    /// The value as it is, on the grid `2^exponent`.
    pub fn plain(exponent: i32) -> Self {
        Self {
            exponent,
            clamp: None,
            inverse: 2f64.powi(-exponent),
        }
    }

    /// The value clamped and centred first, as `dpkit_clamp` computes it.
    pub fn clamped(exponent: i32, clamp: Clamp) -> Self {
        Self {
            clamp: Some(clamp),
            ..Self::plain(exponent)
        }
    }

    /// `value`'s grid steps.
    #[inline]
    pub fn of(&self, value: f64) -> i128 {
        let value = self.clamp.map_or(value, |c| c.apply(value));
        grid_steps(value, self.inverse)
    }
}

impl PartialEq for Steps {
    fn eq(&self, other: &Self) -> bool {
        self.exponent == other.exponent
            && self.clamp.map(|c| c.bits()) == other.clamp.map(|c| c.bits())
    }
}

impl Eq for Steps {}

impl std::hash::Hash for Steps {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.exponent.hash(state);
        self.clamp.map(|c| c.bits()).hash(state);
    }
}

impl ExactSum {
    /// Whether it returns its count too.
    pub(crate) fn counts(&self) -> bool {
        self.counts
    }

    /// The same sum, counting its values too.
    pub(crate) fn counting(&self) -> AggregateUDF {
        AggregateUDF::from(ExactSum {
            rule: self.rule,
            counts: true,
            signature: self.signature.clone(),
        })
    }

    /// The call as `--explain` shows it: a clamp's bounds and centre
    /// after the value, as `dpkit_clamp` shows them.
    fn with_bounds(&self, shown: String) -> String {
        match (self.rule.clamp, shown.strip_suffix(')')) {
            (Some(Clamp { low, high, centre }), Some(call)) => {
                format!("{call}, {low}, {high}, {centre})")
            }
            _ => shown,
        }
    }
}

impl AggregateUDFImpl for ExactSum {
    fn name(&self) -> &str {
        match (self.rule.clamp, self.counts) {
            (None, false) => "dpkit_exact_sum",
            (Some(_), false) => "dpkit_clamped_sum",
            (None, true) => "dpkit_exact_sum_and_count",
            (Some(_), true) => "dpkit_clamped_sum_and_count",
        }
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        udaf_default_schema_name(self, params).map(|shown| self.with_bounds(shown))
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        udaf_default_display_name(self, params).map(|shown| self.with_bounds(shown))
    }

    fn human_display(&self, params: &AggregateFunctionParams) -> Result<String> {
        udaf_default_human_display(self, params).map(|shown| self.with_bounds(shown))
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        match self.counts {
            false => Ok(STEPS_TYPE),
            true => Ok(DataType::Struct(pair_fields())),
        }
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ExactSumAccumulator::new(self.rule, self.counts)))
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    /// All groups' sums in one vector, updated row by row: DataFusion's
    /// adapter around [`ExactSumAccumulator`] would sort and slice every
    /// batch by group first.
    fn create_groups_accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(ExactSumGroups::new(self.rule, self.counts)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let steps = Field::new(format!("{}[steps]", args.name), STEPS_TYPE, true);
        let count = Field::new(format!("{}[count]", args.name), DataType::Int64, false);
        Ok(match self.counts {
            false => vec![Arc::new(steps)],
            true => vec![Arc::new(steps), Arc::new(count)],
        })
    }
}

#[derive(Debug)]
struct ExactSumAccumulator {
    rule: Steps,
    steps: i128,
    /// The values summed, if the sum counts them.
    count: Option<i64>,
}

impl ExactSumAccumulator {
    /// An empty sum by `rule`, counting its values if `counts`.
    fn new(rule: Steps, counts: bool) -> Self {
        let count = counts.then_some(0);
        ExactSumAccumulator {
            rule,
            steps: 0,
            count,
        }
    }

    /// Its sum, or its sum and count.
    fn value(&self) -> Result<ScalarValue> {
        let steps = ScalarValue::Decimal128(Some(self.steps), 38, 0);
        let Some(count) = self.count else {
            return Ok(steps);
        };
        let both = pair_output(vec![self.steps], vec![count])?;
        ScalarValue::try_from_array(&both, 0)
    }
}

/// The grid steps of `value` (`value · inverse` rounded to the nearest
/// integer, ties upwards, saturating at the ends of `i64`), or 0 for a value
/// that is not finite (the clamp before this never lets NaN through).
#[inline]
fn grid_steps(value: f64, inverse: f64) -> i128 {
    let shifted = value * inverse + 0.5;
    // The usual case first, in one comparison (false for NaN and ±∞ too):
    // ⌊shifted⌋ without a libm call, by truncating and stepping down for
    // negatives.
    if shifted.abs() < 4_503_599_627_370_496.0 {
        // |truncated| < 2^52: stepping down one cannot overflow, and the
        // unchecked subtraction drops a branch per row.
        let truncated = shifted as i64;
        return i128::from(truncated.wrapping_sub(i64::from(truncated as f64 > shifted)));
    }
    // Beyond 2^52 every double is a whole number: its floor is itself, cast
    // saturating (bounds up to 1e308 reach here).
    if shifted.is_finite() {
        i128::from(shifted as i64)
    } else {
        0
    }
}

/// The struct field holding the sum, in whole grid steps.
pub const STEPS: &str = "steps";
/// The struct field holding the count of the values summed.
pub const COUNT: &str = "count";

/// The two fields of what a sum with its count returns
/// ([`crate::sum_and_count`]).
pub(crate) fn pair_fields() -> Fields {
    Fields::from(vec![
        Field::new(STEPS, STEPS_TYPE, true),
        Field::new(COUNT, DataType::Int64, false),
    ])
}

/// Every group's steps, as a sum leaves the engine.
fn steps_array(steps: Vec<i128>) -> Result<ArrayRef> {
    let steps = Decimal128Array::from(steps).with_precision_and_scale(38, 0)?;
    Ok(Arc::new(steps))
}

/// The struct of every group's steps and count.
pub(crate) fn pair_output(steps: Vec<i128>, counts: Vec<i64>) -> Result<ArrayRef> {
    let columns: Vec<ArrayRef> = vec![steps_array(steps)?, Arc::new(Int64Array::from(counts))];
    Ok(Arc::new(StructArray::try_new(
        pair_fields(),
        columns,
        None,
    )?))
}

/// How a sum leaves the engine: its whole number of grid steps.
///
/// ```
/// use datafusion::arrow::datatypes::DataType;
/// assert_eq!(dpkit_functions::exact_sum::STEPS_TYPE, DataType::Decimal128(38, 0));
/// ```
pub const STEPS_TYPE: DataType = DataType::Decimal128(38, 0);

impl Accumulator for ExactSumAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_primitive::<Float64Type>();
        for value in values.iter().flatten() {
            self.steps += self.rule.of(value);
        }
        if let Some(count) = &mut self.count {
            *count += (values.len() - values.null_count()) as i64;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let partial = states[0].as_primitive::<Decimal128Type>();
        for i in 0..partial.len() {
            if partial.is_valid(i) {
                self.steps = self.steps.saturating_add(partial.value(i));
            }
        }
        if let Some(count) = &mut self.count {
            *count += states[1]
                .as_primitive::<Int64Type>()
                .iter()
                .flatten()
                .sum::<i64>();
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let steps = ScalarValue::Decimal128(Some(self.steps), 38, 0);
        Ok(match self.count {
            None => vec![steps],
            Some(count) => vec![steps, ScalarValue::Int64(Some(count))],
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.value()
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// Every group's sum of grid steps (see [`ExactSumAccumulator`]).
#[derive(Debug)]
struct ExactSumGroups {
    rule: Steps,
    steps: Vec<i128>,
    /// Steps of batches with no NULL and no filter, not yet in `steps`.
    pending: PendingSteps,
    /// Every group's count of the values summed, if the sum counts them.
    counts: Option<Vec<i64>>,
}

impl ExactSumGroups {
    fn new(rule: Steps, counts: bool) -> Self {
        ExactSumGroups {
            rule,
            steps: Vec::new(),
            pending: PendingSteps::default(),
            counts: counts.then(Vec::new),
        }
    }

    /// Adds a batch's rows to their groups, counting each in `tally`.
    fn add<T: Tally + ?Sized>(
        &mut self,
        values: &Float64Array,
        groups: &[usize],
        opt_filter: Option<&BooleanArray>,
        tally: &mut T,
    ) {
        if values.null_count() == 0 && opt_filter.is_none() {
            let (rule, steps) = (self.rule, &mut self.steps);
            self.pending
                .add(values.values(), groups, rule, steps, tally);
            return;
        }
        for (row, &group) in groups.iter().enumerate() {
            if counted(values, opt_filter, row) {
                self.steps[group] += self.rule.of(values.value(row));
                tally.one(group);
            }
        }
    }

    /// The groups `emit_to` takes: their sums, and their counts if the
    /// sum counts.
    fn take(&mut self, emit_to: EmitTo) -> (Vec<i128>, Option<Vec<i64>>) {
        match &mut self.counts {
            None => self.pending.settle(&mut self.steps, &mut NoTally),
            Some(counts) => self.pending.settle(&mut self.steps, counts.as_mut_slice()),
        }
        let steps = emit_to.take_needed(&mut self.steps);
        let counts = self.counts.as_mut().map(|c| emit_to.take_needed(c));
        (steps, counts)
    }
}

/// What a sum counts as it adds: nothing, or one for each row summed, in
/// the row's group ([`crate::sum_and_count`]). Added in the same loop as
/// the steps, so a count costs one more add per row, not another pass.
trait Tally {
    /// Counts one row of `group`.
    fn one(&mut self, group: usize);
    /// Counts `rows` rows of `group`.
    fn many(&mut self, group: usize, rows: i64);
}

/// A sum that does not count.
struct NoTally;

impl Tally for NoTally {
    #[inline(always)]
    fn one(&mut self, _group: usize) {}
    fn many(&mut self, _group: usize, _rows: i64) {}
}

impl Tally for [i64] {
    #[inline(always)]
    fn one(&mut self, group: usize) {
        self[group] += 1;
    }
    fn many(&mut self, group: usize, rows: i64) {
        self[group] += rows;
    }
}

/// 2^53: every whole number up to it is a double, and a sum of whole
/// numbers that stays within it is computed exactly.
const EXACT_IN_DOUBLES: f64 = 9_007_199_254_740_992.0;
/// 1.5 · 2^52: adding it to `|s| < 2^51` leaves no bit below 1, so the
/// sum is `s` rounded to the nearest whole number (ties to even), and
/// subtracting it again is exact.
const ROUND_TO_WHOLE: f64 = 6_755_399_441_055_744.0;
/// Rows summed in doubles between checks of their size.
const CHUNK: usize = 4096;
/// Rows whose steps are computed together before they are added
/// ([`add_blocks`]).
const BLOCK: usize = 32;
/// What one chunk may add to any group's sum in doubles: 2^44, so 512
/// chunks fit below 2^53 between two moves into 128 bits.
const CHUNK_TOTAL: f64 = 17_592_186_044_416.0;

/// Grid steps summed per group in doubles, where that is exact and costs
/// what the engine's own `SUM` costs, then moved into the 128-bit sums.
///
/// The argument: a chunk of `n` rows is summed here only if every row's
/// `s = value · 2^-k + 0.5` has `|s| ≤ CHUNK_TOTAL / n − 1` (NaN and ±∞
/// fail the test), so `|⌊s⌋| ≤ CHUNK_TOTAL / n` and the chunk moves a
/// group's sum by at most `CHUNK_TOTAL`. `used` adds `CHUNK_TOTAL` per
/// chunk and the sums move into 128 bits before it would pass 2^53, so
/// every partial sum is a whole number below 2^53: each addition is exact,
/// whatever the order, and `⌊s⌋` is computed exactly ([`floor_small`],
/// `|s| < 2^51`). The result is [`grid_steps`]'s, summed. A clamp's
/// values all pass the test when its reach `r = max(|low − c|, |high − c|)`
/// does: `v − c` lies between the rounded ends, and rounding to nearest is
/// monotone and symmetric, so `|v · 2^-k + 0.5| ≤ r · 2^-k + 0.5` as
/// computed.
///
/// Each group's rows are counted beside its sum, in the same doubles: a
/// count moves into the integers with the sums, after at most 512 chunks,
/// so it is at most 2^21 and exact. One vector add per row updates
/// both, where a count of its own in integers cost a second load, add,
/// overflow check and store: on the 10-million-row benchmark (release
/// build, AMD EPYC, 2026-11-29, 8 runs alternating) the median ratio to
/// the plain query went from 1.139 to 1.121.
#[derive(Debug, Default)]
struct PendingSteps {
    /// Every group's pending sum of steps and count of rows.
    sums: Vec<[f64; 2]>,
    /// A bound on every `|sums[g]|`.
    used: f64,
}

/// Where [`PendingSteps::add_each`] adds: the grid's `2^-exponent`, the
/// groups' 128-bit sums and their counts.
struct Sum<'a, T: ?Sized> {
    inverse: f64,
    steps: &'a mut [i128],
    tally: &'a mut T,
}

/// `⌊s⌋` for `|s| < 2^51`, in doubles: the nearest whole number, less one
/// if it is above `s` (less 0 otherwise, which a vector unit computes as a
/// mask of 1.0 and a subtraction, with no select between two results).
#[inline]
fn floor_small(s: f64) -> f64 {
    let nearest = (s + ROUND_TO_WHOLE) - ROUND_TO_WHOLE;
    nearest - if nearest > s { 1.0 } else { 0.0 }
}

/// `|s| ≤ limit`; false for NaN.
#[inline]
fn within(s: f64, limit: f64) -> bool {
    s.abs() <= limit
}

/// Adds the steps `steps_of(value)` of every row to its group's pending
/// sum, and one to its count, a block of [`BLOCK`] rows at a time.
///
/// Two passes per block: the steps of the block's rows (no store depends
/// on another, so it vectorises), then the adds by group, where each row's
/// sum and count are one vector add. In one pass over all rows `perf` put
/// the sum at 0.20 of the hash table's samples on the 10-million-row
/// benchmark (`crates/dpkit-query/benches/dp_overhead.rs`), in two passes
/// over a chunk of 4,096 rows at 0.14. In blocks this small, the loads of
/// the next block's values are under way while this block's adds run,
/// where a pass over a whole chunk first waited on all its loads and then
/// on all its adds: on the same benchmark (release, AMD EPYC, 2026-11-29,
/// 8 runs alternating) blocks of 16, 32 and 64 rows gave median ratios of
/// 1.086, 1.091 and 1.100 against 1.125 for whole chunks (16 and 32
/// differ by less than the runs spread).
#[inline(always)]
fn add_blocks(
    sums: &mut [[f64; 2]],
    values: &[f64],
    groups: &[usize],
    steps_of: impl Fn(f64) -> f64,
) {
    let mut floors = [0.0f64; BLOCK];
    for (values, groups) in values.chunks(BLOCK).zip(groups.chunks(BLOCK)) {
        let floors = &mut floors[..values.len()];
        for (floor, &value) in floors.iter_mut().zip(values) {
            *floor = steps_of(value);
        }
        for (&floor, &group) in floors.iter().zip(groups) {
            let pending = &mut sums[group];
            pending[0] += floor;
            pending[1] += 1.0;
        }
    }
}

impl PendingSteps {
    /// Adds every row of a batch with no NULL and no filter to `steps`,
    /// by `rule`.
    fn add<T: Tally + ?Sized>(
        &mut self,
        values: &[f64],
        groups: &[usize],
        rule: Steps,
        steps: &mut [i128],
        tally: &mut T,
    ) {
        let sum = Sum {
            inverse: rule.inverse,
            steps,
            tally,
        };
        match rule.clamp {
            None => self.add_each(values, groups, sum, |v| v, f64::INFINITY),
            Some(clamp) => {
                let reach = clamp.reach();
                self.add_each(values, groups, sum, |v| clamp.apply(v), reach)
            }
        }
    }

    /// Adds `prepared(value)` of every row, through the doubles chunk by
    /// chunk where the argument above holds. `reach` bounds every
    /// `|prepared(value)|` in advance (a clamp's), or is infinite: a chunk
    /// whose rows it keeps within the limit is not looked at first.
    #[inline]
    fn add_each<T: Tally + ?Sized>(
        &mut self,
        values: &[f64],
        groups: &[usize],
        sum: Sum<'_, T>,
        prepared: impl Fn(f64) -> f64,
        reach: f64,
    ) {
        let Sum {
            inverse,
            steps,
            tally,
        } = sum;
        self.sums.resize(steps.len(), [0.0; 2]);
        for (values, groups) in values.chunks(CHUNK).zip(groups.chunks(CHUNK)) {
            let limit = CHUNK_TOTAL / values.len() as f64 - 1.0;
            // `|` rather than `||`: no early exit, so the test vectorises.
            // |v · inverse + 0.5| ≤ reach · inverse + 0.5 for every |v| ≤ reach.
            let outside = !within(reach * inverse + 0.5, limit)
                && values.iter().fold(false, |out, &v| {
                    out | !within(prepared(v) * inverse + 0.5, limit)
                });
            if outside {
                for (&value, &group) in values.iter().zip(groups) {
                    steps[group] += grid_steps(prepared(value), inverse);
                    tally.one(group);
                }
                continue;
            }
            if self.used + CHUNK_TOTAL > EXACT_IN_DOUBLES {
                self.flush(steps, tally);
            }
            self.used += CHUNK_TOTAL;
            let sums = &mut self.sums[..steps.len()];
            add_blocks(sums, values, groups, |v| {
                floor_small(prepared(v) * inverse + 0.5)
            });
        }
    }

    /// Moves every pending sum into `steps` and every count into `tally`
    /// (each is a whole number below 2^53, so the conversion is exact) and
    /// starts again from zero.
    fn flush<T: Tally + ?Sized>(&mut self, steps: &mut [i128], tally: &mut T) {
        for (group, (total, pending)) in steps.iter_mut().zip(&mut self.sums).enumerate() {
            *total += pending[0] as i128;
            tally.many(group, pending[1] as i64);
            *pending = [0.0; 2];
        }
        self.used = 0.0;
    }

    /// Moves everything into `steps` and forgets the groups, for an emit
    /// that may renumber them.
    fn settle<T: Tally + ?Sized>(&mut self, steps: &mut [i128], tally: &mut T) {
        self.flush(steps, tally);
        self.sums.clear();
    }
}

impl GroupsAccumulator for ExactSumGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.steps.resize(total_num_groups, 0);
        let values = values[0].as_primitive::<Float64Type>();
        match self.counts.take() {
            None => self.add(values, group_indices, opt_filter, &mut NoTally),
            Some(mut counts) => {
                counts.resize(total_num_groups, 0);
                self.add(values, group_indices, opt_filter, counts.as_mut_slice());
                self.counts = Some(counts);
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        match self.take(emit_to) {
            (steps, Some(counts)) => pair_output(steps, counts),
            (steps, None) => steps_array(steps),
        }
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (steps, counts) = self.take(emit_to);
        let mut state = vec![steps_array(steps)?];
        state.extend(counts.map(|c| Arc::new(Int64Array::from(c)) as ArrayRef));
        Ok(state)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.steps.resize(total_num_groups, 0);
        let partial = values[0].as_primitive::<Decimal128Type>();
        for (row, &group) in group_indices.iter().enumerate() {
            if partial.is_valid(row) {
                self.steps[group] = self.steps[group].saturating_add(partial.value(row));
            }
        }
        if let Some(counts) = &mut self.counts {
            counts.resize(total_num_groups, 0);
            let partial = values[1].as_primitive::<Int64Type>();
            for (row, &group) in group_indices.iter().enumerate() {
                counts[group] += partial.value(row);
            }
        }
        Ok(())
    }

    /// Each row's own state: its grid steps, or NULL (summed as nothing)
    /// for a NULL or filtered-out row.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<Float64Type>();
        let state: Decimal128Array = (0..values.len())
            .map(|row| counted(values, opt_filter, row).then(|| self.rule.of(values.value(row))))
            .collect();
        let mut states: Vec<ArrayRef> = vec![Arc::new(state.with_precision_and_scale(38, 0)?)];
        if self.counts.is_some() {
            let ones = (0..values.len()).map(|row| i64::from(counted(values, opt_filter, row)));
            states.push(Arc::new(Int64Array::from_iter_values(ones)));
        }
        Ok(states)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.steps.capacity() * std::mem::size_of::<i128>()
            + self.pending.sums.capacity() * std::mem::size_of::<[f64; 2]>()
            + self.counts.as_ref().map_or(0, Vec::capacity) * std::mem::size_of::<i64>()
    }
}

/// Whether `row` is summed: not NULL, and kept by the filter if any.
fn counted(values: &Float64Array, opt_filter: Option<&BooleanArray>, row: usize) -> bool {
    values.is_valid(row) && opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row))
}

/// The grid exponent of `function`, if it is `dpkit_exact_sum`: a database
/// backend computes the same sum under a name that carries it.
///
/// ```
/// use datafusion::logical_expr::Expr;
/// use datafusion::prelude::col;
/// use dpkit_functions::exact_sum::{exact_sum, grid_exponent};
/// let Expr::AggregateFunction(sum) = exact_sum(col("v"), -24) else { unreachable!() };
/// assert_eq!(grid_exponent(&sum.func), Some(-24));
/// ```
pub fn grid_exponent(function: &AggregateUDF) -> Option<i32> {
    function
        .inner()
        .downcast_ref::<ExactSum>()
        .filter(|sum| sum.rule.clamp.is_none() && !sum.counts)
        .map(|sum| sum.rule.exponent)
}

/// The exact sum of `values` by a [`Steps`] rule, computed as the engine's
/// accumulators compute it (for SQLite, which runs it row by row).
///
/// ```
/// use dpkit_functions::exact_sum::{RowSum, Steps};
/// let quarters = Steps::plain(-2);
/// let mut sum = RowSum::default();
/// for value in [1.25, 2.5, -0.75] {
///     sum.add(value, &quarters);
/// }
/// assert_eq!(sum.steps(), 12); // 3.0 in quarters
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RowSum {
    steps: i128,
}

impl RowSum {
    /// Adds one value by `rule` (NULLs are skipped by the caller).
    #[inline]
    pub fn add(&mut self, value: f64, rule: &Steps) {
        self.steps = self.steps.saturating_add(rule.of(value));
    }

    /// The sum in grid steps, as the engine's accumulators give it.
    pub fn steps(self) -> i128 {
        self.steps
    }
}

/// `dpkit_exact_sum(value)` on the grid `2^exponent`; `value` is Float64.
///
/// ```
/// use datafusion::prelude::col;
/// let sum = dpkit_functions::exact_sum::exact_sum(col("v"), 0);
/// assert_eq!(sum.to_string(), "dpkit_exact_sum(v)");
/// ```
pub fn exact_sum(value: Expr, exponent: i32) -> Expr {
    sum_by(value, Steps::plain(exponent))
}

fn sum_by(value: Expr, rule: Steps) -> Expr {
    let function = AggregateUDF::from(ExactSum {
        rule,
        counts: false,
        signature: Signature::exact(vec![DataType::Float64], Volatility::Immutable),
    });
    function.call(vec![value])
}

/// `dpkit_exact_sum(dpkit_clamp(value, low, high[, centre]))` as one
/// aggregate that clamps each value in its own pass
/// (`dpkit_clamped_sum(value, low, high, centre)`), with the same steps;
/// `None` for any other expression. The separate clamp writes a new array
/// for every batch, which took about 4% of the embedded engine's time on
/// the 10-million-row benchmark (`perf`, 2026-11-27).
///
/// ```
/// use datafusion::prelude::col;
/// use dpkit_functions::{clamp::clamp_and_centre, exact_sum::{exact_sum, fused}};
/// let sum = exact_sum(clamp_and_centre(col("v"), 0.0, 10.0, 5.0), -20);
/// assert_eq!(fused(&sum).unwrap().to_string(), "dpkit_clamped_sum(v, 0, 10, 5)");
/// assert!(fused(&exact_sum(col("v"), -20)).is_none());
/// ```
pub fn fused(expr: &Expr) -> Option<Expr> {
    let Expr::AggregateFunction(aggregate) = expr else {
        return None;
    };
    let (value, rule) = clamp_inside(aggregate)?;
    Some(sum_by(value, rule))
}

/// For `dpkit_exact_sum(dpkit_clamp(value, …))`, plain (no DISTINCT,
/// FILTER, ORDER BY or null treatment) and with finite ordered bounds:
/// `value` and the rule that clamps it inside the sum. What [`fused`]
/// builds, and what SQLite's exact sum registers.
pub fn clamp_inside(aggregate: &AggregateFunction) -> Option<(Expr, Steps)> {
    let sum = aggregate.func.inner().downcast_ref::<ExactSum>()?;
    if sum.rule.clamp.is_some() || sum.counts || !plain(aggregate) {
        return None;
    }
    let [argument] = aggregate.params.args.as_slice() else {
        return None;
    };
    let (value, clamp) = Clamp::of(argument)?;
    Some((value, Steps::clamped(sum.rule.exponent, clamp)))
}

/// No DISTINCT, FILTER, ordering or null treatment: an aggregate of
/// every row its group holds.
pub(crate) fn plain(aggregate: &AggregateFunction) -> bool {
    let params = &aggregate.params;
    !params.distinct
        && params.filter.is_none()
        && params.order_by.is_empty()
        && params.null_treatment.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_steps_round_ties_up_and_saturate_like_floor() {
        for value in [
            0.49,
            0.5,
            -0.5,
            -0.51,
            2.5,
            -2.5,
            1e15 + 0.5,
            -7.0,
            1e300,
            -1e300,
        ] {
            let expected = i128::from((value + 0.5f64).floor() as i64);
            assert_eq!(grid_steps(value, 1.0), expected, "{value}");
        }
        assert_eq!(grid_steps(f64::NAN, 1.0), 0);
    }

    #[test]
    fn grouped_sums_equal_the_one_group_sums_whatever_the_batches() {
        let exponent = -24; // the planner's grid for [-100, 100]: 2^(6 - 30)
        let values: Vec<f64> = (0..1000)
            .map(|i| (i as f64 * 0.731).sin() * 100.0)
            .collect();
        let groups: Vec<usize> = (0..1000).map(|i| i % 3).collect();
        let array = |v: &[f64]| -> ArrayRef { Arc::new(Float64Array::from(v.to_vec())) };
        let mut grouped = ExactSumGroups::new(Steps::plain(exponent), false);
        grouped
            .update_batch(&[array(&values[..400])], &groups[..400], None, 3)
            .unwrap();
        // A second accumulator's state, merged in.
        let mut other = ExactSumGroups::new(Steps::plain(exponent), false);
        other
            .update_batch(&[array(&values[400..])], &groups[400..], None, 3)
            .unwrap();
        let state = other.state(EmitTo::All).unwrap();
        grouped.merge_batch(&state, &[0, 1, 2], 3).unwrap();
        let sums = grouped.evaluate(EmitTo::All).unwrap();
        for group in 0..3 {
            let mut single = ExactSumAccumulator::new(Steps::plain(exponent), false);
            let mine: Vec<f64> = (0..1000)
                .filter(|i| i % 3 == group)
                .map(|i| values[i])
                .collect();
            single.update_batch(&[array(&mine)]).unwrap();
            let ScalarValue::Decimal128(Some(expected), 38, 0) = single.evaluate().unwrap() else {
                panic!("a sum")
            };
            assert_eq!(sums.as_primitive::<Decimal128Type>().value(group), expected);
        }
    }

    #[test]
    fn nulls_and_filtered_rows_add_nothing_in_groups_and_in_row_states() {
        let exponent = 0; // the planner's grid for whole numbers
        let values: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            None,
            Some(4.0),
            Some(8.0),
        ]));
        let filter = BooleanArray::from(vec![Some(true), Some(true), None, Some(true)]);
        let mut grouped = ExactSumGroups::new(Steps::plain(exponent), false);
        grouped
            .update_batch(
                std::slice::from_ref(&values),
                &[0, 0, 1, 1],
                Some(&filter),
                2,
            )
            .unwrap();
        let sums = grouped.evaluate(EmitTo::All).unwrap();
        assert_eq!(
            sums.as_primitive::<Decimal128Type>().values().to_vec(),
            [1, 8]
        );
        let rows = grouped.convert_to_state(&[values], Some(&filter)).unwrap();
        let rows = rows[0].as_primitive::<Decimal128Type>();
        assert_eq!(
            rows.null_count(),
            2,
            "the NULL value and the row the filter drops"
        );
    }

    #[test]
    fn sums_are_exact_whatever_the_order() {
        let exponent = 0; // the planner's grid for ±2^40: never coarser than 1 below 2^62
        let values = [2f64.powi(40), 1.0, -2f64.powi(40), 1.0, 0.25];
        let mut forward = ExactSumAccumulator::new(Steps::plain(exponent), false);
        let mut backward = ExactSumAccumulator::new(Steps::plain(exponent), false);
        let array =
            |v: Vec<f64>| -> ArrayRef { Arc::new(datafusion::arrow::array::Float64Array::from(v)) };
        forward.update_batch(&[array(values.to_vec())]).unwrap();
        backward
            .update_batch(&[array(values.iter().rev().copied().collect())])
            .unwrap();
        assert_eq!(forward.evaluate().unwrap(), backward.evaluate().unwrap());
        // Never coarser than 1: 2.25 is 2 steps of 1 (a quarter rounds to 0).
        assert_eq!(exponent, 0);
        assert_eq!(
            forward.evaluate().unwrap(),
            ScalarValue::Decimal128(Some(2), 38, 0)
        );
    }

    /// Ten million values at the bound: a total of 2^53.7 steps, past what
    /// a double holds exactly, still exact in steps (the old sum stopped
    /// at 2^53 steps and answered 536,870,912 for 900,000,000).
    #[test]
    fn totals_past_two_to_the_53_steps_stay_exact() {
        let exponent = -24; // the planner's grid for [0, 90]: 2^(6 - 30)
        let mut groups = ExactSumGroups::new(Steps::plain(exponent), false);
        let batch: ArrayRef = Arc::new(Float64Array::from(vec![90.0; 100_000]));
        for _ in 0..100 {
            groups
                .update_batch(std::slice::from_ref(&batch), &[0; 100_000], None, 1)
                .unwrap();
        }
        let sums = groups.evaluate(EmitTo::All).unwrap();
        let steps = sums.as_primitive::<Decimal128Type>().value(0);
        assert!(steps > 1 << 53);
        let total = dpkit_core::lattice::GridValue::new(steps, exponent);
        assert_eq!(total.to_f64(), 900_000_000.0);
    }

    /// The integer grid rounds each value, ties upwards: −0.5 and 7.5 are
    /// 0 and 8, so a value moved by 8 moves the sum by 8, never 9 (as
    /// rounding the total half away from zero could).
    #[test]
    fn whole_number_grids_round_each_value_translation_invariantly() {
        let sum = |values: Vec<f64>| {
            // The planner's grid for whole numbers: 2^0.
            let mut one = ExactSumAccumulator::new(Steps::plain(0), false);
            one.update_batch(&[Arc::new(Float64Array::from(values)) as ArrayRef])
                .unwrap();
            one.steps
        };
        assert_eq!(sum(vec![-0.5]), 0);
        assert_eq!(sum(vec![7.5]), 8);
        assert_eq!(
            sum(vec![-0.5, -0.5, -0.5]) + 8 * 3,
            sum(vec![7.5, 7.5, 7.5])
        );
    }

    /// Every group's sum through the doubles equals the sum of each row's
    /// grid steps: ties either way of zero, the chunk's limit and just past
    /// it, NaN and ±∞, and 600 chunks in one group at the limit (which pass
    /// 2^53, and would lose their low bits, unless moved into 128 bits) and
    /// at twice the limit (which must not be summed in doubles at all).
    #[test]
    fn batches_summed_in_doubles_equal_the_row_by_row_sums() {
        let limit = CHUNK_TOTAL / CHUNK as f64 - 1.0;
        let ties: Vec<f64> = (-64..64).map(|k| f64::from(k) + 0.5).collect();
        let tiny = vec![1e-300, -1e-300, -0.0, 0.0, 0.49999999999999994];
        let mut edges = vec![limit - 0.5, -limit - 0.5, 3.0];
        edges.extend(std::iter::repeat_n(-7.25, CHUNK - edges.len()));
        let past = [vec![limit + 0.5], vec![1.0; CHUNK - 1]].concat();
        let odd = [vec![f64::NAN], vec![2.5; CHUNK + 7], vec![f64::INFINITY]].concat();
        let at_limit = vec![limit - 0.5; 600 * CHUNK];
        let twice_the_limit = vec![2.0 * limit + 0.5; 600 * CHUNK];
        for (values, groups) in [
            (ties, 3),
            (tiny, 2),
            (edges, 5),
            (past, 3),
            (odd, 4),
            (at_limit, 1),
            (twice_the_limit, 1),
        ] {
            let of = |row: usize| (row * 7 + row / 3) % groups;
            let indices: Vec<usize> = (0..values.len()).map(of).collect();
            let mut expected = vec![0i128; groups];
            for (row, &value) in values.iter().enumerate() {
                expected[of(row)] += grid_steps(value, 1.0);
            }
            let mut accumulator = ExactSumGroups::new(Steps::plain(0), false);
            let array: ArrayRef = Arc::new(Float64Array::from(values));
            accumulator
                .update_batch(&[array], &indices, None, groups)
                .unwrap();
            let sums = accumulator.evaluate(EmitTo::All).unwrap();
            let sums = sums.as_primitive::<Decimal128Type>();
            for (group, &expected) in expected.iter().enumerate() {
                assert_eq!(sums.value(group), expected, "group {group}");
            }
        }
    }

    /// The sum that clamps in its own pass gives the steps of the clamp
    /// followed by the sum, in groups through the doubles, row by row with
    /// NULLs, and in one group: values beyond both bounds, NaN, ±∞ and ±0;
    /// a clamp whose reach is just within the chunk's limit (its chunks are
    /// not looked at first), and one whose reach is beyond it on the low
    /// side only, 600 chunks long (taking its reach from the high side
    /// would sum past 2^53 in doubles and lose steps).
    #[test]
    fn a_clamp_in_the_sum_gives_the_steps_of_the_clamp_then_the_sum() {
        let limit = CHUNK_TOTAL / CHUNK as f64 - 1.0;
        let odd = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            7.5,
            -7.5,
        ];
        let mixed: Vec<f64> = (0..3 * CHUNK + 5)
            .map(|i| match i % 9 {
                0..7 => odd[i % 7],
                7 => 1e300,
                _ => (i as f64).sin() * 3e9,
            })
            .collect();
        let within = Clamp {
            low: -(limit - 0.5),
            high: limit - 0.5,
            centre: 0.0,
        };
        // Odd steps (−2^34 − 1 each), four times the limit: summed in
        // doubles, a group would pass 2^53 within 128 chunks and round.
        let low_side = Clamp {
            low: -4.0 * limit,
            high: 10.0,
            centre: 5.0,
        };
        let small = Clamp {
            low: 0.0,
            high: 100.0,
            centre: 50.0,
        };
        let at_low = vec![-8.0 * limit; 600 * CHUNK];
        for (values, clamp, groups) in [
            (mixed.clone(), within, 3),
            (mixed.clone(), small, 3),
            (mixed, low_side, 3),
            (at_low, low_side, 1),
        ] {
            let of = |row: usize| (row * 7 + row / 3) % groups;
            let indices: Vec<usize> = (0..values.len()).map(of).collect();
            let clamped: Vec<f64> = values.iter().map(|&v| clamp.apply(v)).collect();
            let mut expected = vec![0i128; groups];
            for (row, &value) in clamped.iter().enumerate() {
                expected[of(row)] += grid_steps(value, 1.0);
            }
            let with_nulls: Float64Array = values
                .iter()
                .enumerate()
                .map(|(row, &v)| (row % 11 != 0).then_some(v))
                .collect();
            let mut expected_nulls = vec![0i128; groups];
            for (row, &value) in clamped.iter().enumerate() {
                if row % 11 != 0 {
                    expected_nulls[of(row)] += grid_steps(value, 1.0);
                }
            }
            for (array, expected) in [
                (Float64Array::from(values.clone()), &expected),
                (with_nulls, &expected_nulls),
            ] {
                let array: ArrayRef = Arc::new(array);
                let mut grouped = ExactSumGroups::new(Steps::clamped(0, clamp), false);
                grouped
                    .update_batch(std::slice::from_ref(&array), &indices, None, groups)
                    .unwrap();
                let sums = grouped.evaluate(EmitTo::All).unwrap();
                let sums = sums.as_primitive::<Decimal128Type>();
                for (group, &expected) in expected.iter().enumerate() {
                    assert_eq!(sums.value(group), expected, "group {group}");
                }
                let rows = grouped.convert_to_state(std::slice::from_ref(&array), None);
                let rows = rows.unwrap()[0].as_primitive::<Decimal128Type>().clone();
                assert_eq!(rows.iter().flatten().sum::<i128>(), expected.iter().sum());
                let mut single = ExactSumAccumulator::new(Steps::clamped(0, clamp), false);
                single.update_batch(&[array]).unwrap();
                assert_eq!(single.steps, expected.iter().sum::<i128>());
            }
        }
    }

    /// A sum that counts gives the steps of the sum that does not, and
    /// the count `count(x)` gives: through the doubles (no NULL), row by
    /// row (NULLs, a filter, values past the chunk's limit), from another
    /// accumulator's state and from rows' own states.
    #[test]
    fn a_sum_that_counts_counts_what_count_counts_and_sums_the_same() {
        let limit = CHUNK_TOTAL / CHUNK as f64 - 1.0;
        let rule = Steps::clamped(
            0,
            Clamp {
                low: -4.0 * limit,
                high: 10.0,
                centre: 5.0,
            },
        );
        let plain: ArrayRef = Arc::new(Float64Array::from_iter_values(
            (0..CHUNK + 9).map(|i| i as f64 * 0.37),
        ));
        let nulls: ArrayRef = Arc::new(Float64Array::from_iter(
            (0..300).map(|i| (i % 7 != 0).then_some(-8.0 * limit)),
        ));
        // No NULL, but past the chunk's limit: summed row by row.
        let far: ArrayRef = Arc::new(Float64Array::from(vec![-8.0 * limit; CHUNK]));
        let keep = BooleanArray::from_iter((0..300).map(|i| (i % 5 != 0).then_some(i % 3 != 0)));
        let groups = 4;
        let of =
            |rows: usize| -> Vec<usize> { (0..rows).map(|r| (r * 7 + r / 3) % groups).collect() };
        let (mut counting, mut summing) = (
            ExactSumGroups::new(rule, true),
            ExactSumGroups::new(rule, false),
        );
        let mut expected = vec![0i64; groups];
        let mut count = |values: &ArrayRef, filter: Option<&BooleanArray>| {
            for (row, group) in of(values.len()).into_iter().enumerate() {
                let kept = filter.is_none_or(|f| f.is_valid(row) && f.value(row));
                expected[group] += i64::from(values.is_valid(row) && kept);
            }
        };
        let batches = [
            (&plain, None),
            (&far, None),
            (&nulls, None),
            (&nulls, Some(&keep)),
        ];
        for (values, filter) in batches {
            for accumulator in [&mut counting, &mut summing] {
                let batch = std::slice::from_ref(values);
                accumulator
                    .update_batch(batch, &of(values.len()), filter, groups)
                    .unwrap();
            }
            count(values, filter);
        }
        // Another accumulator's state, and rows' own states, merged in.
        for accumulator in [&mut counting, &mut summing] {
            let mut other = ExactSumGroups::new(rule, accumulator.counts.is_some());
            let batch = std::slice::from_ref(&plain);
            other
                .update_batch(batch, &of(plain.len()), None, groups)
                .unwrap();
            let state = other.state(EmitTo::All).unwrap();
            accumulator
                .merge_batch(&state, &[0, 1, 2, 3], groups)
                .unwrap();
            let rows = accumulator.convert_to_state(std::slice::from_ref(&nulls), Some(&keep));
            accumulator
                .merge_batch(&rows.unwrap(), &of(300), groups)
                .unwrap();
        }
        count(&plain, None);
        count(&nulls, Some(&keep));
        let rows = counting.convert_to_state(std::slice::from_ref(&nulls), Some(&keep));
        let ones = rows.unwrap()[1].as_primitive::<Int64Type>().clone();
        for row in 0..300 {
            let kept = nulls.is_valid(row) && keep.is_valid(row) && keep.value(row);
            assert_eq!(ones.value(row), i64::from(kept), "row {row}");
        }
        let both = counting.evaluate(EmitTo::All).unwrap();
        let sums = summing.evaluate(EmitTo::All).unwrap();
        assert_eq!(both.as_struct().column(0).as_ref(), sums.as_ref());
        let counts = both
            .as_struct()
            .column(1)
            .as_primitive::<Int64Type>()
            .clone();
        assert_eq!(counts.values().to_vec(), expected);
    }

    /// Counts kept beside the sums in doubles are moved with them: over
    /// 600 chunks in three groups (which moves them into 128 bits on the
    /// way) and emitted a group at a time, every count and sum is the
    /// row-by-row one.
    #[test]
    fn counts_in_doubles_move_with_the_sums_and_are_emitted_with_them() {
        let rule = Steps::clamped(
            -2,
            Clamp {
                low: 0.0,
                high: 100.0,
                centre: 50.0,
            },
        );
        let rows = 600 * CHUNK + 17;
        let of = |row: usize| (row * 7 + row / 3) % 3;
        let value = |row: usize| (row % 1000) as f64 * 0.1 - 3.0;
        let values: ArrayRef = Arc::new(Float64Array::from_iter_values((0..rows).map(value)));
        let indices: Vec<usize> = (0..rows).map(of).collect();
        let (mut sums, mut counts) = (vec![0i128; 3], vec![0i64; 3]);
        for row in 0..rows {
            sums[of(row)] += rule.of(value(row));
            counts[of(row)] += 1;
        }
        let mut counting = ExactSumGroups::new(rule, true);
        counting.update_batch(&[values], &indices, None, 3).unwrap();
        for (first, emit) in [(0, EmitTo::First(1)), (1, EmitTo::All)] {
            let both = counting.evaluate(emit).unwrap();
            let both = both.as_struct();
            let steps = both.column(0).as_primitive::<Decimal128Type>();
            let rows = both.column(1).as_primitive::<Int64Type>();
            for group in 0..both.len() {
                let expected = (sums[first + group], counts[first + group]);
                assert_eq!((steps.value(group), rows.value(group)), expected);
            }
        }
    }

    /// In one group: the sum, and the count of the values that are not NULL.
    #[test]
    fn a_sum_that_counts_in_one_group_counts_what_is_not_null() {
        let rule = Steps::clamped(
            0,
            Clamp {
                low: -4.0,
                high: 10.0,
                centre: 5.0,
            },
        );
        let nulls: ArrayRef = Arc::new(Float64Array::from_iter(
            (0..300).map(|i| (i % 7 != 0).then_some(f64::from(i) - 50.0)),
        ));
        let mut single = ExactSumAccumulator::new(rule, true);
        single.update_batch(std::slice::from_ref(&nulls)).unwrap();
        let mut alone = ExactSumAccumulator::new(rule, false);
        alone.update_batch(std::slice::from_ref(&nulls)).unwrap();
        let ScalarValue::Struct(both) = single.evaluate().unwrap() else {
            panic!("a struct")
        };
        let steps = both.column(0).as_primitive::<Decimal128Type>().value(0);
        assert_eq!(steps, alone.steps);
        assert_eq!(
            both.column(1).as_primitive::<Int64Type>().value(0),
            300 - 43
        );
    }
}
