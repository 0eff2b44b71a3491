//! The SQL stage: a query over each batch's rows (table `input`) and the static tables,
//! run on Apache DataFusion — Spark's `selectExpr`/`where` and stream-static joins.
//! Only queries that can run batch by batch are taken: no aggregation, ordering,
//! limit, window function or join of the stream with itself (each is refused at load
//! time, naming the stage to use instead). DataFusion runs on its own Arrow version;
//! batches cross to it and back without copying ([`bridge`]).

mod bridge;
mod tables;

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow_datafusion::datatypes::SchemaRef as DfSchemaRef;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};

use super::stage::{BatchTime, Stage, StageOutput, StageStats, StaticTable};
use crate::pipeline::TableSpec;
use crate::state::StateStore;

/// The table name of a batch's rows in a stage's query.
pub const INPUT_TABLE: &str = "input";

/// A SQL stage.
pub struct SqlStage {
    name: String,
    query: String,
    context: SessionContext,
    runtime: tokio::runtime::Runtime,
    /// The input's schema in DataFusion's Arrow.
    input_schema: DfSchemaRef,
    output_schema: SchemaRef,
    /// The most rows one batch may output (`max-output-rows-per-batch`).
    max_rows: u64,
    /// The static tables as read when the stage opened.
    tables: Vec<StaticTable>,
}

impl SqlStage {
    /// Plans `query` over rows of `input` and the `tables` (read now), refusing what
    /// cannot run batch by batch; a batch may output at most `max_rows` rows.
    pub fn open(name: &str, query: &str, input: &SchemaRef, tables: &[TableSpec], max_rows: u64) -> Result<SqlStage> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let config = SessionConfig::new().with_target_partitions(1).with_information_schema(false);
        let context = SessionContext::new_with_config(config);
        let mut read = Vec::with_capacity(tables.len());
        for table in tables {
            let schema = bridge::schema_to_datafusion(&table.schema)?;
            let (rows, fingerprint) = tables::read_table(table)?;
            read.push(fingerprint);
            let batches = rows.iter().map(|batch| bridge::to_datafusion(batch, &schema)).collect::<Result<Vec<_>>>()?;
            let provider = MemTable::try_new(schema, vec![batches])?;
            context.register_table(table.name.as_str(), Arc::new(provider))?;
        }
        let input_schema = bridge::schema_to_datafusion(input)?;
        context.register_table(INPUT_TABLE, Arc::new(MemTable::try_new(input_schema.clone(), vec![vec![]])?))?;
        let plan = runtime
            .block_on(async {
                let options =
                    SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false);
                context.sql_with_options(query, options).await.map(|frame| frame.logical_plan().clone())
            })
            .map_err(|error| anyhow::anyhow!("the SQL query does not plan: {error}"))?;
        check_incremental(&plan)?;
        let planned = bridge::schema_from_datafusion(plan.schema().as_arrow())?;
        let fields = planned
            .fields()
            .iter()
            .map(|field| match eddy_type(field.data_type()) {
                Some(data_type) => Ok(Field::new(field.name(), data_type, true)),
                None => Err(anyhow::anyhow!(
                    "the query's column '{}' is {}, which eddy has no type for: cast it to BIGINT, DOUBLE, STRING, BOOLEAN, BINARY or TIMESTAMP",
                    field.name(),
                    field.data_type()
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        let output_schema = Arc::new(Schema::new(fields));
        Ok(SqlStage {
            name: name.to_string(),
            query: query.to_string(),
            context,
            runtime,
            input_schema,
            output_schema,
            max_rows,
            tables: read,
        })
    }
}

/// Refuses a plan that needs more than one batch's rows at a time, re-emits a static
/// table's rows each batch, or gives other rows on a replay after a crash.
fn check_incremental(plan: &LogicalPlan) -> Result<()> {
    let mut problem: Option<String> = None;
    let mut refuse = |text: &str| {
        problem.get_or_insert_with(|| text.to_string());
    };
    plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => refuse(
                "an aggregation (GROUP BY, DISTINCT, UNION, count(*)) spans batches: use an aggregate stage \
                 ([stage.aggregate]) for running aggregates, a window stage ([stage.window]) for aggregates over event \
                 time, or a dedup stage ([stage.dedup]) for DISTINCT",
            ),
            LogicalPlan::Sort(_) => refuse("ORDER BY would order one batch only: leave it out (a sink keeps each batch's order)"),
            LogicalPlan::Limit(_) => refuse("LIMIT would apply per batch: leave it out"),
            LogicalPlan::Window(_) => refuse("a window function (OVER) spans batches: use a window stage or a processor stage"),
            LogicalPlan::Join(join) => {
                let (left, right) = (reads_input(&join.left), reads_input(&join.right));
                use datafusion::logical_expr::JoinType::*;
                if left && right {
                    refuse("the query joins `input` with itself: that needs state; use a processor stage");
                }
                let static_side_kept = match join.join_type {
                    Left | LeftSemi | LeftAnti | LeftMark => right && !left,
                    Right | RightSemi | RightAnti | RightMark => left && !right,
                    Full => true,
                    Inner => false,
                };
                if static_side_kept {
                    refuse("this join keeps a static table's rows whether the batch matches or not, so they would be output every batch (Spark refuses it too): join so that `input` is the preserved side, or use an inner join");
                }
            }
            LogicalPlan::Union(union) if union.inputs.iter().any(|branch| !reads_input(branch)) => {
                refuse("a UNION branch that does not read `input` would output its rows every batch");
            }
            _ => {}
        }
        for expr in node.expressions() {
            expr.apply(|e| {
                if let datafusion::logical_expr::Expr::ScalarFunction(call) = e
                    && REPLAY_UNSAFE.contains(&call.name())
                {
                    refuse(&format!(
                        "{}() gives other values when a batch runs again after a crash: use the rows' own columns (the event time) instead",
                        call.name()
                    ));
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if let Some(problem) = problem {
        bail!("{problem}");
    }
    if !reads_input(plan) {
        bail!("the query does not read the table `input` (the batch's rows)");
    }
    Ok(())
}

/// Functions whose results differ between a batch and its replay.
const REPLAY_UNSAFE: &[&str] = &["now", "current_timestamp", "current_date", "current_time", "random", "uuid"];

/// Whether `plan` scans the table `input`.
fn reads_input(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && scan.table_name.table() == INPUT_TABLE
        {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// The eddy type a DataFusion result column becomes (`None`: none fits).
fn eddy_type(data_type: &arrow::datatypes::DataType) -> Option<arrow::datatypes::DataType> {
    use arrow::datatypes::DataType::*;
    Some(match data_type {
        Boolean => Boolean,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 => Int64,
        Float16 | Float32 | Float64 | Decimal128(_, _) | Decimal256(_, _) => Float64,
        Utf8 | LargeUtf8 | Utf8View => Utf8,
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => Binary,
        Timestamp(_, _) | Date32 | Date64 => crate::contract::rows::arrow_type(crate::contract::DataType::Timestamp),
        _ => return None,
    })
}

/// `batch` with each column cast to the type of `schema`'s column.
fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(column.clone())
            } else {
                arrow::compute::cast(column, field.data_type())
                    .with_context(|| format!("column '{}' cannot be cast to {}", field.name(), field.data_type()))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
}

impl Stage for SqlStage {
    fn output_schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    fn accepts_late_rows(&self) -> bool {
        true
    }

    fn is_stateless(&self) -> bool {
        true
    }

    fn static_tables(&self) -> Vec<StaticTable> {
        self.tables.clone()
    }

    fn timers_due(&mut self, _store: &StateStore, _time: BatchTime) -> Result<bool> {
        Ok(false)
    }

    fn run(&mut self, _store: &StateStore, input: &RecordBatch, _time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let rows = bridge::to_datafusion(input, &self.input_schema)?;
        let table = MemTable::try_new(self.input_schema.clone(), vec![vec![rows]])?;
        self.context.deregister_table(INPUT_TABLE)?;
        self.context.register_table(INPUT_TABLE, Arc::new(table))?;
        // At most one row more than the cap is computed: a join that multiplies rows
        // (a static table with duplicate keys) cannot fill memory before it fails.
        let most = usize::try_from(self.max_rows.saturating_add(1)).unwrap_or(usize::MAX);
        let batches = self
            .runtime
            .block_on(async { self.context.sql(&self.query).await?.limit(0, Some(most))?.collect().await })
            .map_err(|error| anyhow::anyhow!("SQL stage '{}' failed: {error}", self.name))?;
        if batches.iter().map(|batch| batch.num_rows() as u64).sum::<u64>() > self.max_rows {
            bail!(
                "SQL stage '{}': the query's output of this batch passed {} rows, over the limit of {} rows per batch \
                 (max-output-rows-per-batch of the stage); check the joins for duplicate keys in a static table, make \
                 batches smaller (the source's max-files-per-trigger, max-bytes-per-trigger or max-rows-per-trigger), \
                 or raise the stage's max-output-rows-per-batch",
                self.name,
                self.max_rows,
                self.max_rows
            );
        }
        let rows = batches
            .into_iter()
            .filter(|batch| batch.num_rows() > 0)
            .map(|batch| {
                let schema = bridge::schema_from_datafusion(batch.schema().as_ref())?;
                conform(bridge::from_datafusion(&batch, &schema)?, &self.output_schema)
            })
            .collect::<Result<Vec<_>>>()?;
        let stats = StageStats {
            name: self.name.clone(),
            run_ms: started.elapsed().as_millis() as u64,
            ..StageStats::default()
        };
        Ok(StageOutput { txns: Vec::new(), rows, stats })
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
