//! The built-in stages' output does not depend on how many shards run a batch: the
//! same batches through a window or aggregate stage split over 1, 2 or 3 shards give
//! byte-identical output (windows by window then group key, aggregates by group key),
//! so a batch re-run after a crash on a machine with another core count writes what
//! the crashed run wrote. (The dedup stage runs a batch in one part: its output is its
//! input's order.)

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::SchemaRef;

use super::{AggregateStage, BatchTime, Stage, WindowStage};
use crate::pipeline::{Pipeline, StageKind};
use crate::state::StateStore;

const SECOND: i64 = 1_000_000;

/// The pipeline in `dir` with `stage` over `user STRING, amount BIGINT, ts TIMESTAMP`.
fn pipeline(dir: &Path, stage: &str) -> Result<Pipeline> {
    std::fs::create_dir_all(dir.join("input"))?;
    let text = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT, ts TIMESTAMP\"\n\
         watermark = {{ column = \"ts\", delay = \"5 seconds\" }}\n\n[[stage]]\n{stage}\n\n[sink]\nformat = \"console\"\n"
    );
    Pipeline::parse(&dir.join("pipeline.toml"), &text)
}

/// The stage of `pipeline`, split over `parts` shards.
fn open(pipeline: &Pipeline, parts: usize) -> Result<Box<dyn Stage>> {
    let (spec, schema) = (&pipeline.stages[0], &pipeline.sources[0].schema);
    Ok(match &spec.kind {
        StageKind::Window(window) => {
            Box::new(WindowStage::open(spec, window, schema, pipeline.key_groups, true)?.with_shards(parts))
        }
        StageKind::Aggregate(aggregate) => {
            Box::new(AggregateStage::open(spec, aggregate, schema, pipeline.key_groups)?.with_shards(parts))
        }
        _ => anyhow::bail!("not a sharded built-in stage"),
    })
}

/// Rows of 60 users, `batch`'s amounts and event times spread over 40 seconds.
fn rows(schema: &SchemaRef, batch: i64) -> Result<RecordBatch> {
    let rows = 0..300i64;
    let users: StringArray = rows.clone().map(|row| Some(format!("user-{:02}", (row * 7 + batch) % 60))).collect();
    let amounts: Int64Array = rows.clone().map(|row| Some(row % 13 + batch)).collect();
    let times: TimestampMicrosecondArray = rows.map(|row| Some((batch * 20 + (row * 11) % 40) * SECOND)).collect();
    let times = times.with_timezone("+00:00");
    Ok(RecordBatch::try_new(schema.clone(), vec![Arc::new(users), Arc::new(amounts), Arc::new(times)])?)
}

/// Each batch's output, as JSON lines, of three batches (the watermark closing
/// windows in the second and third) through `stage` on `parts` shards.
fn outputs(stage: &str, parts: usize) -> Result<Vec<String>> {
    let dir = tempfile::tempdir()?;
    let pipeline = pipeline(dir.path(), stage)?;
    let store = StateStore::open(&dir.path().join("state"))?;
    let mut stage = open(&pipeline, parts)?;
    let schema = pipeline.sources[0].schema.clone();
    let mut outputs = Vec::new();
    for (batch_id, watermark) in [(0, None), (1, Some(25 * SECOND)), (2, Some(200 * SECOND))] {
        let time = BatchTime {
            batch_id,
            processing_time: (1 + batch_id as i64) * SECOND,
            watermark,
            late_rows_watermark: None,
        };
        let ran = stage.run(&store, &rows(&schema, batch_id as i64)?, time).context("batch runs")?;
        store.commit_all(ran.txns, batch_id)?;
        let mut writer = arrow::json::LineDelimitedWriter::new(Vec::new());
        for rows in &ran.rows {
            writer.write(rows)?;
        }
        writer.finish()?;
        outputs.push(String::from_utf8(writer.into_inner())?);
    }
    Ok(outputs)
}

#[test]
fn window_and_aggregate_output_is_the_same_in_any_number_of_shards() -> Result<()> {
    let stages = [
        "[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\ngroup-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\"]",
        "[stage.window]\ntime-column = \"ts\"\nsize = \"20 seconds\"\nslide = \"10 seconds\"\ngroup-by = [\"user\"]\n\
         aggregates = [\"max(amount)\"]\noutput-mode = \"update\"",
        "[stage.window]\ntime-column = \"ts\"\ngap = \"3 seconds\"\ngroup-by = [\"user\"]\naggregates = [\"count\"]",
        "[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\ngroup-by = [\"user\"]\naggregates = [\"count\"]\n\
         output-mode = \"complete\"",
        "[stage.aggregate]\ngroup-by = [\"user\"]\naggregates = [\"count\", \"avg(amount)\"]",
        "[stage.aggregate]\ngroup-by = [\"user\"]\naggregates = [\"min(amount)\"]\noutput-mode = \"complete\"",
    ];
    for stage in stages {
        let one = outputs(stage, 1)?;
        assert!(one.iter().filter(|batch| !batch.is_empty()).count() >= 2, "{stage}: output in most batches");
        for parts in [2, 3] {
            assert_eq!(outputs(stage, parts)?, one, "{stage} on {parts} shards");
        }
    }
    Ok(())
}
