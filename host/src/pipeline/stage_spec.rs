//! The chain of `pipeline.toml`: `[[stage]]` entries (each names one kind: `sql`,
//! `window`, `dedup` or `processor`) or the one-stage spelling `[operator]`, and the
//! `[[table]]` entries SQL stages join with. Checks that need a stage's input schema
//! (column names and types) are made when the stages open, in chain order.

use std::path::Path;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::aggregate_spec::{RawAggregate, RawWindow, aggregate_spec, window_spec};
use super::limits::RawSize;
use super::located::{Locator, one_of, positive};
use super::model::*;
use super::processor_spec::{RawOperator, operator_spec};
use super::schema::parse_schema;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawStage {
    name: Option<Spanned<String>>,
    sql: Option<Spanned<String>>,
    window: Option<Spanned<RawWindow>>,
    aggregate: Option<Spanned<RawAggregate>>,
    dedup: Option<Spanned<RawDedup>>,
    processor: Option<Spanned<RawOperator>>,
    max_output_rows_per_batch: Option<Spanned<RawSize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawDedup {
    key: Spanned<Vec<String>>,
    within_watermark: Option<bool>,
    state: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawTable {
    name: Spanned<String>,
    format: Spanned<String>,
    path: Spanned<String>,
    schema: Spanned<String>,
}

/// The chain: `[[stage]]` entries or `[operator]`, exactly one of the two.
pub(super) fn stage_specs(
    at: &Locator,
    base: &Path,
    operator: Option<&Spanned<RawOperator>>,
    stages: Option<&Spanned<Vec<RawStage>>>,
    source: &SourceSpec,
) -> Result<Vec<StageSpec>> {
    match (operator, stages) {
        (Some(_), Some(stages)) => Err(at.at(
            stages,
            "stage",
            "give either [operator] or [[stage]] entries (a processor stage is `[stage.processor]`), not both",
        )),
        (None, None) => Err(anyhow::anyhow!(
            "{}: the pipeline has no stages: add [operator] (a processor) or [[stage]] entries (sql, window, aggregate, dedup, processor)",
            at.file().display()
        )),
        (Some(operator), None) => {
            let spec = operator_spec(at, base, operator.get_ref(), "operator", source, true)?;
            Ok(vec![StageSpec {
                name: "processor".into(),
                operator_id: 0,
                line: at.line_of(operator),
                kind: StageKind::Processor(spec),
                max_output_rows: None,
            }])
        }
        (None, Some(stages)) => {
            if stages.get_ref().is_empty() {
                return Err(at.at(stages, "stage", "expected at least one [[stage]]"));
            }
            let mut specs: Vec<StageSpec> = Vec::new();
            for (index, stage) in stages.get_ref().iter().enumerate() {
                let spec = stage_spec(at, base, index, stage, source)?;
                if let Some(other) = specs.iter().find(|other| other.name == spec.name) {
                    return Err(anyhow::anyhow!(
                        "{}:{}: stage: the name '{}' is taken by the stage on line {}; give each stage its own name",
                        at.file().display(),
                        spec.line,
                        spec.name,
                        other.line
                    ));
                }
                specs.push(spec);
            }
            Ok(specs)
        }
    }
}

fn stage_spec(at: &Locator, base: &Path, index: usize, raw: &RawStage, source: &SourceSpec) -> Result<StageSpec> {
    let key = format!("stage[{index}]");
    let given = [
        raw.sql.is_some(),
        raw.window.is_some(),
        raw.aggregate.is_some(),
        raw.dedup.is_some(),
        raw.processor.is_some(),
    ];
    let line = [
        raw.sql.as_ref().map(|s| at.line_of(s)),
        raw.window.as_ref().map(|s| at.line_of(s)),
        raw.aggregate.as_ref().map(|s| at.line_of(s)),
        raw.dedup.as_ref().map(|s| at.line_of(s)),
        raw.processor.as_ref().map(|s| at.line_of(s)),
        raw.name.as_ref().map(|s| at.line_of(s)),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(1);
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(anyhow::anyhow!(
            "{}:{line}: {key}: a stage is exactly one of `sql = \"SELECT …\"`, [stage.window], [stage.aggregate], [stage.dedup] or [stage.processor]",
            at.file().display()
        ));
    }
    let kind = if let Some(sql) = &raw.sql {
        if sql.get_ref().trim().is_empty() {
            return Err(at.at(sql, &format!("{key}.sql"), "expected a SELECT query over the table `input`"));
        }
        StageKind::Sql(sql.get_ref().clone())
    } else if let Some(window) = &raw.window {
        StageKind::Window(window_spec(at, &format!("{key}.window"), window)?)
    } else if let Some(aggregate) = &raw.aggregate {
        StageKind::Aggregate(aggregate_spec(at, &format!("{key}.aggregate"), aggregate)?)
    } else if let Some(dedup) = &raw.dedup {
        StageKind::Dedup(dedup_spec(at, &format!("{key}.dedup"), dedup, source)?)
    } else if let Some(processor) = &raw.processor {
        StageKind::Processor(operator_spec(
            at,
            base,
            processor.get_ref(),
            &format!("{key}.processor"),
            source,
            index == 0,
        )?)
    } else {
        unreachable!("exactly one kind was checked above")
    };
    let name = match &raw.name {
        Some(name) if name.get_ref().is_empty() || name.get_ref().contains('/') => {
            return Err(at.at(name, &format!("{key}.name"), "expected a non-empty name without '/'"));
        }
        Some(name) => name.get_ref().clone(),
        None => format!("{}-{index}", kind.kind_name()),
    };
    let max_output_rows = match (&kind, &raw.max_output_rows_per_batch) {
        (StageKind::Processor(_), Some(raw)) => {
            return Err(at.at(
                raw,
                &format!("{key}.max-output-rows-per-batch"),
                "a processor stage's output limits are under [stage.processor] (max-output-rows-per-batch there)",
            ));
        }
        (StageKind::Processor(_), None) => None,
        (_, Some(raw)) => Some(positive(at, raw, &format!("{key}.max-output-rows-per-batch"), false)?),
        (_, None) => Some(DEFAULT_STAGE_OUTPUT_ROWS),
    };
    Ok(StageSpec { name, operator_id: index as u16, line, kind, max_output_rows })
}

fn dedup_spec(at: &Locator, key: &str, raw: &Spanned<RawDedup>, source: &SourceSpec) -> Result<DedupSpec> {
    let dedup = raw.get_ref();
    if dedup.key.get_ref().is_empty() {
        return Err(at.at(&dedup.key, &format!("{key}.key"), "expected at least one column"));
    }
    let forever = match &dedup.state {
        None => false,
        Some(state) if state.get_ref() == "forever" => true,
        Some(state) => {
            return Err(at.at(
                state,
                &format!("{key}.state"),
                "the only value is \"forever\" (remember every key; with a watermark, late rows are still dropped)",
            ));
        }
    };
    let retention = match (&source.watermark, forever, dedup.within_watermark == Some(true)) {
        (_, true, true) => {
            return Err(at.at(raw, key, "within-watermark and state = \"forever\" exclude each other"));
        }
        (_, true, false) => DedupRetention::Forever,
        (None, false, _) => {
            return Err(at.at(
                raw,
                key,
                "without a watermark, deduplication remembers every key forever: say so with state = \"forever\", or add [source.watermark]",
            ));
        }
        (Some(watermark), false, true) => DedupRetention::WithinWatermark { delay_us: watermark.delay_us },
        (Some(watermark), false, false) => {
            if !dedup.key.get_ref().contains(&watermark.column) {
                return Err(at.at(
                    &dedup.key,
                    &format!("{key}.key"),
                    format!(
                        "with a watermark, the key must hold the event-time column '{}' for a key to be forgotten (Spark's dropDuplicates); \
                         or set within-watermark = true (dropDuplicatesWithinWatermark: remembered for the watermark delay), \
                         or state = \"forever\" (every key kept; late rows still dropped)",
                        watermark.column
                    ),
                ));
            }
            DedupRetention::UntilWatermark
        }
    };
    let event_time_column = source.watermark.as_ref().map(|watermark| watermark.column.clone());
    Ok(DedupSpec { key: dedup.key.get_ref().clone(), retention, event_time_column })
}

/// The static tables `[[table]]` declares.
pub(super) fn table_specs(at: &Locator, base: &Path, raw: &[RawTable]) -> Result<Vec<TableSpec>> {
    let mut tables: Vec<TableSpec> = Vec::new();
    for (index, table) in raw.iter().enumerate() {
        let key = format!("table[{index}]");
        let name = table.name.get_ref().clone();
        if name == "input" || tables.iter().any(|t| t.name == name) {
            return Err(at.at(
                &table.name,
                &format!("{key}.name"),
                format!("the table name '{name}' is taken (`input` is the batch's rows)"),
            ));
        }
        let formats = [("csv", TableFormat::Csv), ("json", TableFormat::Json), ("parquet", TableFormat::Parquet)];
        let format = one_of(at, &table.format, &format!("{key}.format"), "format", &formats)?;
        let path = base.join(table.path.get_ref());
        if !path.exists() {
            return Err(at.at(&table.path, &format!("{key}.path"), format!("{} does not exist", path.display())));
        }
        let schema = parse_schema(table.schema.get_ref())
            .map_err(|problem| at.at(&table.schema, &format!("{key}.schema"), problem))?;
        tables.push(TableSpec { name, format, path, schema });
    }
    Ok(tables)
}
