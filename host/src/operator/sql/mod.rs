//! The SQL stage: a query over each batch's rows (table `input`) and the static tables,
//! run on Apache DataFusion — Spark's `selectExpr`/`where` and stream-static joins.
//! Only queries that can run batch by batch are taken: no aggregation, ordering,
//! limit, window function or join of the stream with itself (each is refused at load
//! time, naming the stage to use instead). DataFusion runs on its own Arrow version;
//! batches cross to it and back without copying ([`bridge`]).

mod bridge;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow_datafusion::datatypes::SchemaRef as DfSchemaRef;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::stage::{BatchTime, Stage, StageOutput, StageStats};
use crate::decode::decode_file;
use crate::pipeline::{FileFormat, TableFormat, TableSpec};
use crate::source::list_input_files;
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
}

impl SqlStage {
    /// Plans `query` over rows of `input` and the `tables` (read now), refusing what
    /// cannot run batch by batch.
    pub fn open(name: &str, query: &str, input: &SchemaRef, tables: &[TableSpec]) -> Result<SqlStage> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let config = SessionConfig::new().with_target_partitions(1).with_information_schema(false);
        let context = SessionContext::new_with_config(config);
        for table in tables {
            let schema = bridge::schema_to_datafusion(&table.schema)?;
            let batches = read_table(table)?
                .iter()
                .map(|batch| bridge::to_datafusion(batch, &schema))
                .collect::<Result<Vec<_>>>()?;
            let provider = MemTable::try_new(schema, vec![batches])?;
            context.register_table(table.name.as_str(), Arc::new(provider))?;
        }
        let input_schema = bridge::schema_to_datafusion(input)?;
        context.register_table(INPUT_TABLE, Arc::new(MemTable::try_new(input_schema.clone(), vec![vec![]])?))?;
        let plan = runtime
            .block_on(async { context.sql(query).await.map(|frame| frame.logical_plan().clone()) })
            .map_err(|error| anyhow::anyhow!("the SQL query does not plan: {error}"))?;
        check_incremental(&plan)?;
        let planned = bridge::schema_from_datafusion(plan.schema().as_arrow())?;
        let fields: Vec<_> = planned.fields().iter().map(|field| field.as_ref().clone().with_nullable(true)).collect();
        let output_schema = Arc::new(Schema::new(fields));
        Ok(SqlStage { name: name.to_string(), query: query.to_string(), context, runtime, input_schema, output_schema })
    }
}

/// Refuses a plan that needs more than one batch's rows at a time.
fn check_incremental(plan: &LogicalPlan) -> Result<()> {
    let mut input_scans = 0;
    let mut problem: Option<&'static str> = None;
    plan.apply(|node| {
        match node {
            LogicalPlan::Aggregate(_) => {
                problem.get_or_insert(
                    "an aggregation (GROUP BY, DISTINCT, count(*)) spans batches: use a window stage ([stage.window]) for aggregates over event time, or a dedup stage ([stage.dedup]) for DISTINCT",
                );
            }
            LogicalPlan::Sort(_) => {
                problem.get_or_insert("ORDER BY would order one batch only: leave it out (a sink keeps each batch's order)");
            }
            LogicalPlan::Limit(_) => {
                problem.get_or_insert("LIMIT would apply per batch: leave it out");
            }
            LogicalPlan::Window(_) => {
                problem.get_or_insert("a window function (OVER) spans batches: use a window stage or a processor stage");
            }
            LogicalPlan::TableScan(scan) if scan.table_name.table() == INPUT_TABLE => input_scans += 1,
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if let Some(problem) = problem {
        bail!("{problem}");
    }
    if input_scans > 1 {
        bail!("the query reads `input` twice: a join of the stream with itself needs state; use a processor stage");
    }
    if input_scans == 0 {
        bail!("the query does not read the table `input` (the batch's rows)");
    }
    Ok(())
}

/// Every row of a static table.
fn read_table(table: &TableSpec) -> Result<Vec<RecordBatch>> {
    let mut batches = Vec::new();
    for file in list_input_files(&table.path)? {
        match table.format {
            TableFormat::Parquet => batches.extend(read_parquet(&file, &table.schema)?),
            TableFormat::Csv | TableFormat::Json => {
                let format = match table.format {
                    TableFormat::Csv => FileFormat::Csv { header: true, delimiter: b',' },
                    _ => FileFormat::Json,
                };
                let bytes =
                    std::fs::read(&file).with_context(|| format!("cannot read table file {}", file.display()))?;
                batches.push(decode_file(&format, &bytes, &table.schema, &file, false)?.rows);
            }
        }
    }
    Ok(batches)
}

fn read_parquet(file: &Path, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let reader = std::fs::File::open(file).with_context(|| format!("cannot read table file {}", file.display()))?;
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(reader)
        .with_context(|| format!("{} is not a Parquet file", file.display()))?;
    let mut batches = Vec::new();
    for batch in builder.build()? {
        let batch = batch?;
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let column = batch.column_by_name(field.name()).with_context(|| {
                    format!("{} has no column '{}' (the table's schema names it)", file.display(), field.name())
                })?;
                arrow::compute::cast(column, field.data_type()).with_context(|| {
                    format!("{}: column '{}' cannot be read as {}", file.display(), field.name(), field.data_type())
                })
            })
            .collect::<Result<Vec<_>>>()?;
        batches.push(RecordBatch::try_new(schema.clone(), columns)?);
    }
    Ok(batches)
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

    fn timers_due(&self, _store: &StateStore, _time: BatchTime) -> Result<bool> {
        Ok(false)
    }

    fn run(&mut self, _store: &StateStore, input: &RecordBatch, _time: BatchTime) -> Result<StageOutput> {
        let started = std::time::Instant::now();
        let rows = bridge::to_datafusion(input, &self.input_schema)?;
        let table = MemTable::try_new(self.input_schema.clone(), vec![vec![rows]])?;
        self.context.deregister_table(INPUT_TABLE)?;
        self.context.register_table(INPUT_TABLE, Arc::new(table))?;
        let batches = self
            .runtime
            .block_on(async { self.context.sql(&self.query).await?.collect().await })
            .map_err(|error| anyhow::anyhow!("SQL stage '{}' failed: {error}", self.name))?;
        let rows = batches
            .into_iter()
            .filter(|batch| batch.num_rows() > 0)
            .map(|batch| bridge::from_datafusion(&batch, &self.output_schema))
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
