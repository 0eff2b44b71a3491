//! A window's running aggregates: what is kept in state per window (CBOR, readable
//! with `eddy state`), how a row updates it, how two sessions merge, and the output
//! columns it becomes.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanBuilder, Float64Array, Float64Builder, Int64Array, Int64Builder,
    RecordBatch, StringBuilder, TimestampMicrosecondArray, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::contract::Scalar;
use crate::pipeline::{Aggregate, AggregateFn};
use crate::util::prefetch;

/// The time zone of eddy's TIMESTAMP columns (as `contract::arrow_type` makes them).
const TIME_ZONE: &str = "+00:00";

/// A number an aggregate keeps: exact for BIGINT and TIMESTAMP columns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Number {
    /// From a BIGINT or TIMESTAMP column.
    Int(i64),
    /// From a DOUBLE column.
    Float(f64),
}

impl Number {
    fn add(self, other: Number) -> Number {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => Number::Int(a.wrapping_add(b)),
            (a, b) => Number::Float(a.as_f64() + b.as_f64()),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Number::Int(v) => v as f64,
            Number::Float(v) => v,
        }
    }

    /// Whether `self` orders before `other`; NaN orders after every number (as in Spark).
    fn less(self, other: Number) -> bool {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a < b,
            (a, b) => {
                let (a, b) = (a.as_f64(), b.as_f64());
                !a.is_nan() && (b.is_nan() || a < b)
            }
        }
    }
}

/// One aggregate's running state: the non-null values seen, their sum, min and max.
/// The store keeps only what the aggregate's result needs (see [`trimmed`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Running {
    /// Rows (count(*)) or non-null values.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub n: i64,
    /// The sum, once a value was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<Number>,
    /// The smallest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Number>,
    /// The largest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Number>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Running {
    fn add(&mut self, value: Number) {
        self.n += 1;
        self.sum = Some(self.sum.map_or(value, |sum| sum.add(value)));
        if self.min.is_none_or(|min| value.less(min)) {
            self.min = Some(value);
        }
        if self.max.is_none_or(|max| max.less(value)) {
            self.max = Some(value);
        }
    }

    /// Adds another's values (stored first, then a batch's: sums add in that order).
    pub fn merge(&mut self, other: &Running) {
        self.n += other.n;
        self.sum = match (self.sum, other.sum) {
            (Some(a), Some(b)) => Some(a.add(b)),
            (a, b) => a.or(b),
        };
        for (mine, theirs, keep_other) in [(&mut self.min, other.min, true), (&mut self.max, other.max, false)] {
            if let Some(theirs) = theirs
                && mine.is_none_or(|m| if keep_other { theirs.less(m) } else { m.less(theirs) })
            {
                *mine = Some(theirs);
            }
        }
    }
}

/// How many windows ahead of the one a loop reads it starts loading the aggregates of.
pub const PREFETCH_AHEAD: usize = 8;

/// One window of one group, as kept in state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowState {
    /// Inclusive start, microseconds since the epoch.
    pub start: i64,
    /// Exclusive end.
    pub end: i64,
    /// Per aggregate, in the stage's order.
    pub aggregates: Vec<Running>,
}

impl WindowState {
    /// An empty window.
    pub fn new(start: i64, end: i64, aggregates: usize) -> Self {
        WindowState { start, end, aggregates: vec![Running::default(); aggregates] }
    }

    /// Aggregates outside any window (the aggregate stage's, output without bounds).
    pub fn unbounded(aggregates: Vec<Running>) -> Self {
        WindowState { start: i64::MIN, end: i64::MAX, aggregates }
    }

    /// Adds another window's (a session merged into this one).
    pub fn merge(&mut self, other: &WindowState) {
        self.start = self.start.min(other.start);
        self.end = self.end.max(other.end);
        for (mine, theirs) in self.aggregates.iter_mut().zip(&other.aggregates) {
            mine.merge(theirs);
        }
    }
}

/// Each aggregate's running state with only what its result reads (`functions`, in
/// the aggregates' order): what the store keeps.
pub fn trimmed(aggregates: &[Running], functions: &[AggregateFn]) -> Vec<Running> {
    aggregates
        .iter()
        .zip(functions)
        .map(|(running, function)| match function {
            AggregateFn::Count => Running { n: running.n, ..Running::default() },
            AggregateFn::Sum => Running { sum: running.sum, ..Running::default() },
            AggregateFn::Min => Running { min: running.min, ..Running::default() },
            AggregateFn::Max => Running { max: running.max, ..Running::default() },
            AggregateFn::Avg => Running { n: running.n, sum: running.sum, ..Running::default() },
        })
        .collect()
}

/// How an aggregate reads its column.
#[derive(Clone, Debug)]
pub struct Column {
    /// The aggregate.
    pub aggregate: Aggregate,
    /// Its input column's index (`None`: count(*)).
    pub index: Option<usize>,
    /// Its input column's type.
    pub data_type: Option<DataType>,
}

/// Resolves the aggregates' columns in `input`, refusing what they cannot read.
pub fn resolve(aggregates: &[Aggregate], input: &SchemaRef) -> Result<Vec<Column>> {
    aggregates
        .iter()
        .map(|aggregate| {
            let Some(name) = &aggregate.column else {
                return Ok(Column { aggregate: aggregate.clone(), index: None, data_type: None });
            };
            let index = input.index_of(name).map_err(|_| {
                anyhow::anyhow!("aggregate '{}' reads column '{name}', which is not among the stage's input columns", aggregate.name)
            })?;
            let data_type = input.field(index).data_type().clone();
            let numeric = matches!(data_type, DataType::Int64 | DataType::Float64);
            let ordered = numeric || matches!(data_type, DataType::Timestamp(TimeUnit::Microsecond, _));
            let fits = match aggregate.function {
                AggregateFn::Count => true,
                AggregateFn::Sum | AggregateFn::Avg => numeric,
                AggregateFn::Min | AggregateFn::Max => ordered,
            };
            if !fits {
                bail!(
                    "aggregate '{}' cannot read column '{name}' of type {data_type}: sum and avg take BIGINT or DOUBLE, min and max also TIMESTAMP",
                    aggregate.name
                );
            }
            Ok(Column { aggregate: aggregate.clone(), index: Some(index), data_type: Some(data_type) })
        })
        .collect()
}

/// The indices of the group-by columns in `input`, refusing a column that is missing or
/// cannot be a key.
pub fn resolve_groups(group_by: &[String], input: &SchemaRef) -> Result<Vec<usize>> {
    group_by
        .iter()
        .map(|column| {
            let index = input.index_of(column).map_err(|_| {
                let names = input.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
                anyhow::anyhow!("group-by column '{column}' is not among the stage's input columns ({names})")
            })?;
            if crate::contract::rows::contract_type(input.field(index).data_type()).is_none() {
                bail!("group-by column '{column}' is {}, which cannot be a key", input.field(index).data_type());
            }
            Ok(index)
        })
        .collect()
}

/// Reads the numbers of the aggregates' columns of a batch.
pub struct Values {
    columns: Vec<ValueColumn>,
}

/// An aggregate's column, its type found once per batch rather than once per row.
enum ValueColumn {
    /// No column (`count(*)`): every row counts.
    Rows,
    Int(Int64Array),
    Float(Float64Array),
    Time(TimestampMicrosecondArray),
    /// A column without numbers: only its non-null values count.
    Present(ArrayRef),
}

impl Values {
    /// The columns `columns` read from `batch`.
    pub fn of(batch: &RecordBatch, columns: &[Column]) -> Values {
        let column = |c: &Column| {
            let Some(index) = c.index else { return ValueColumn::Rows };
            let array = batch.column(index);
            let any = array.as_any();
            if let Some(ints) = any.downcast_ref::<Int64Array>() {
                ValueColumn::Int(ints.clone())
            } else if let Some(floats) = any.downcast_ref::<Float64Array>() {
                ValueColumn::Float(floats.clone())
            } else if let Some(times) = any.downcast_ref::<TimestampMicrosecondArray>() {
                ValueColumn::Time(times.clone())
            } else {
                ValueColumn::Present(array.clone())
            }
        };
        Values { columns: columns.iter().map(column).collect() }
    }

    /// Starts loading the values of row `row` (see [`prefetch`]).
    pub fn prefetch_row(&self, row: usize) {
        for column in &self.columns {
            match column {
                ValueColumn::Int(ints) => ints.values().get(row).map(prefetch),
                ValueColumn::Float(floats) => floats.values().get(row).map(prefetch),
                ValueColumn::Time(times) => times.values().get(row).map(prefetch),
                // Nothing read but validity, or nothing at all.
                ValueColumn::Rows | ValueColumn::Present(_) => None,
            };
        }
    }

    /// Adds row `row` to the running aggregates `state`.
    pub fn add_row(&self, row: usize, state: &mut [Running]) {
        for (running, column) in state.iter_mut().zip(&self.columns) {
            let value = match column {
                ValueColumn::Rows => {
                    running.n += 1;
                    continue;
                }
                ValueColumn::Int(ints) if ints.is_valid(row) => Number::Int(ints.value(row)),
                ValueColumn::Float(floats) if floats.is_valid(row) => Number::Float(floats.value(row)),
                ValueColumn::Time(times) if times.is_valid(row) => Number::Int(times.value(row)),
                ValueColumn::Present(array) if array.is_valid(row) => {
                    running.n += 1;
                    continue;
                }
                _ => continue,
            };
            running.add(value);
        }
    }
}

/// The output schema: the group columns, `window_start` and `window_end` (when
/// `windowed`), the aggregates.
pub fn output_schema(group: &[Field], windowed: bool, columns: &[Column]) -> SchemaRef {
    let mut fields: Vec<Field> = group.iter().map(|f| f.clone().with_nullable(true)).collect();
    if windowed {
        let timestamp = crate::contract::rows::arrow_type(crate::contract::DataType::Timestamp);
        fields.push(Field::new("window_start", timestamp.clone(), false));
        fields.push(Field::new("window_end", timestamp, false));
    }
    for column in columns {
        let data_type = match (column.aggregate.function, &column.data_type) {
            (AggregateFn::Count, _) => DataType::Int64,
            (AggregateFn::Avg, _) | (AggregateFn::Sum, Some(DataType::Float64)) => DataType::Float64,
            (AggregateFn::Sum, _) => DataType::Int64,
            (AggregateFn::Min | AggregateFn::Max, Some(data_type)) => data_type.clone(),
            (AggregateFn::Min | AggregateFn::Max, None) => DataType::Int64,
        };
        fields.push(Field::new(&column.aggregate.name, data_type, column.aggregate.function != AggregateFn::Count));
    }
    Arc::new(Schema::new(fields))
}

/// Output rows for `windows` (each with its group's encoded key), in `schema`, whose
/// aggregate columns hold `functions` in order; without window columns unless
/// `windowed` (then the windows' bounds are not read).
pub fn output_rows(
    schema: &SchemaRef,
    groups: usize,
    windowed: bool,
    functions: &[AggregateFn],
    windows: &[(&[u8], &WindowState)],
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (index, field) in schema.fields().iter().take(groups).enumerate() {
        columns.push(group_column(field.data_type(), index, windows)?);
    }
    let timestamps = |pick: fn(&WindowState) -> i64| -> ArrayRef {
        let mut builder = TimestampMicrosecondBuilder::with_capacity(windows.len()).with_timezone(TIME_ZONE);
        windows.iter().for_each(|(_, w)| builder.append_value(pick(w)));
        Arc::new(builder.finish())
    };
    if windowed {
        columns.push(timestamps(|w| w.start));
        columns.push(timestamps(|w| w.end));
    }
    // Each window's aggregates (scattered in the heap) are read once, for every column,
    // the next ones' loads started ahead.
    let mut values: Vec<Vec<Option<Number>>> = functions.iter().map(|_| Vec::with_capacity(windows.len())).collect();
    for (at, (_, window)) in windows.iter().enumerate() {
        if let Some((_, ahead)) = windows.get(at + PREFETCH_AHEAD) {
            prefetch(&ahead.aggregates[..]);
        }
        for (index, (column, function)) in values.iter_mut().zip(functions).enumerate() {
            column.push(window.aggregates.get(index).and_then(|running| result(running, *function)));
        }
    }
    let first_aggregate = groups + if windowed { 2 } else { 0 };
    for (field, values) in schema.fields().iter().skip(first_aggregate).zip(&values) {
        columns.push(numbers(field.data_type(), values));
    }
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// An aggregate's value (`None`: null, when no value was seen).
fn result(running: &Running, function: AggregateFn) -> Option<Number> {
    match function {
        AggregateFn::Count => Some(Number::Int(running.n)),
        AggregateFn::Sum => running.sum,
        AggregateFn::Min => running.min,
        AggregateFn::Max => running.max,
        AggregateFn::Avg => {
            running.sum.filter(|_| running.n > 0).map(|sum| Number::Float(sum.as_f64() / running.n as f64))
        }
    }
}

fn numbers(data_type: &DataType, values: &[Option<Number>]) -> ArrayRef {
    match data_type {
        DataType::Float64 => Arc::new(values.iter().map(|v| v.map(Number::as_f64)).collect::<Float64Array>()),
        DataType::Timestamp(_, zone) => Arc::new(
            values
                .iter()
                .map(|v| v.map(|n| if let Number::Int(i) = n { i } else { n.as_f64() as i64 }))
                .collect::<TimestampMicrosecondArray>()
                .with_timezone_opt(zone.clone()),
        ),
        _ => Arc::new(
            values
                .iter()
                .map(|v| v.map(|n| if let Number::Int(i) = n { i } else { n.as_f64() as i64 }))
                .collect::<Int64Array>(),
        ),
    }
}

/// Part `index` of `windows`' group keys as a column of `data_type`: strings copied
/// straight from the encoded keys, other types decoded key by key (no decoded copy of
/// every key at once).
fn group_column(data_type: &DataType, index: usize, windows: &[(&[u8], &WindowState)]) -> Result<ArrayRef> {
    let corrupt = "a group key in the store does not decode";
    if data_type == &DataType::Utf8 {
        let mut strings = StringBuilder::with_capacity(windows.len(), windows.len() * 16);
        for (key, _) in windows {
            strings.append_option(crate::state::key::str_part(key, index).context(corrupt)?);
        }
        return Ok(Arc::new(strings.finish()));
    }
    let values = windows.iter().map(|(key, _)| {
        let parts = crate::state::key::decode(key).context(corrupt)?;
        Ok(parts.into_iter().nth(index).unwrap_or(Scalar::Null))
    });
    scalars(data_type, windows.len(), values)
}

/// A column of `data_type` (not a string: see [`group_column`]) from key values.
fn scalars(data_type: &DataType, rows: usize, values: impl Iterator<Item = Result<Scalar>>) -> Result<ArrayRef> {
    Ok(match data_type {
        DataType::Int64 => {
            let mut b = Int64Builder::with_capacity(rows);
            for value in values {
                match value? {
                    Scalar::Int64(i) => b.append_value(i),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Float64 => {
            let mut b = Float64Builder::with_capacity(rows);
            for value in values {
                match value? {
                    Scalar::Float64(f) => b.append_value(f),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(rows);
            for value in values {
                match value? {
                    Scalar::Boolean(x) => b.append_value(x),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Binary => {
            let mut b = BinaryBuilder::with_capacity(rows, rows * 8);
            for value in values {
                match value? {
                    Scalar::Binary(x) => b.append_value(x),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Timestamp(_, zone) => {
            let mut b = TimestampMicrosecondBuilder::with_capacity(rows).with_timezone_opt(zone.clone());
            for value in values {
                match value? {
                    Scalar::Timestamp(t) => b.append_value(t),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        other => bail!("a group column of type {other} cannot be output"),
    })
}
