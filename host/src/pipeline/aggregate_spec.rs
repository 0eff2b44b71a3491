//! The aggregation stages of `pipeline.toml`: `[stage.window]` (an event-time window
//! per group) and `[stage.aggregate]` (a running aggregate per group, no window), and
//! the aggregate expressions both take (`count`, `sum(col) as total`, …).

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::duration::parse_duration;
use super::located::{Locator, output_mode, positive_number};
use super::model::*;
use crate::contract::OutputMode;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawWindow {
    time_column: Spanned<String>,
    size: Option<Spanned<String>>,
    slide: Option<Spanned<String>>,
    gap: Option<Spanned<String>>,
    #[serde(default)]
    group_by: Vec<String>,
    aggregates: Spanned<Vec<String>>,
    output_mode: Option<Spanned<String>>,
    max_complete_rows: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawAggregate {
    #[serde(default)]
    group_by: Vec<String>,
    aggregates: Spanned<Vec<String>>,
    output_mode: Option<Spanned<String>>,
    max_complete_rows: Option<Spanned<u64>>,
}

/// The most sliding windows one row may join (`size / slide`).
const MAX_WINDOWS_PER_ROW: i64 = 1000;

/// The default largest result of a complete-mode window stage.
pub const DEFAULT_MAX_COMPLETE_ROWS: u64 = 100_000;

pub(super) fn duration_us(at: &Locator, raw: &Spanned<String>, key: &str) -> Result<i64> {
    let duration = parse_duration(raw.get_ref()).map_err(|problem| at.at(raw, key, problem))?;
    match i64::try_from(duration.as_micros()) {
        Ok(us) if us > 0 => Ok(us),
        _ => Err(at.at(raw, key, "expected a positive duration, e.g. \"10 seconds\"")),
    }
}

pub(super) fn window_spec(at: &Locator, key: &str, raw: &Spanned<RawWindow>) -> Result<WindowSpec> {
    let window = raw.get_ref();
    let windows = match (&window.size, &window.slide, &window.gap) {
        (Some(size), None, None) => WindowKind::Tumbling { size_us: duration_us(at, size, &format!("{key}.size"))? },
        (Some(size), Some(slide), None) => {
            let size_us = duration_us(at, size, &format!("{key}.size"))?;
            let slide_us = duration_us(at, slide, &format!("{key}.slide"))?;
            if slide_us > size_us {
                return Err(at.at(slide, &format!("{key}.slide"), "the slide must not be longer than the size"));
            }
            if size_us % slide_us != 0 {
                return Err(at.at(slide, &format!("{key}.slide"), "the size must be a multiple of the slide"));
            }
            if size_us / slide_us > MAX_WINDOWS_PER_ROW {
                return Err(at.at(
                    slide,
                    &format!("{key}.slide"),
                    format!(
                        "size / slide is {}: each row would join that many windows; at most {MAX_WINDOWS_PER_ROW} (raise the slide)",
                        size_us / slide_us
                    ),
                ));
            }
            WindowKind::Sliding { size_us, slide_us }
        }
        (None, None, Some(gap)) => WindowKind::Session { gap_us: duration_us(at, gap, &format!("{key}.gap"))? },
        _ => {
            return Err(at.at(
                raw,
                key,
                "give `size` (tumbling), `size` and `slide` (sliding), or `gap` (session windows)",
            ));
        }
    };
    let session = matches!(windows, WindowKind::Session { .. });
    let output_mode = output_mode(
        at,
        window.output_mode.as_ref(),
        &format!("{key}.output-mode"),
        OutputMode::Append,
        if session {
            &[OutputMode::Append, OutputMode::Complete]
        } else {
            &[OutputMode::Append, OutputMode::Update, OutputMode::Complete]
        },
        |_| {
            "session windows support append and complete, not update (as in Spark: a session's rows can merge into another session later)".into()
        },
    )?;
    let aggregates = aggregates(at, key, &window.aggregates, &window.group_by, &["window_start", "window_end"])?;
    let max_complete_rows = max_complete_rows(at, key, window.max_complete_rows.as_ref())?;
    Ok(WindowSpec {
        time_column: window.time_column.get_ref().clone(),
        windows,
        group_by: window.group_by.clone(),
        aggregates,
        output_mode,
        max_complete_rows,
    })
}

/// A running aggregate per group: update (default) or complete mode; append is refused
/// as Spark refuses it (a running aggregate is never final).
pub(super) fn aggregate_spec(at: &Locator, key: &str, raw: &Spanned<RawAggregate>) -> Result<AggregateSpec> {
    let spec = raw.get_ref();
    let output_mode = output_mode(
        at,
        spec.output_mode.as_ref(),
        &format!("{key}.output-mode"),
        OutputMode::Update,
        &[OutputMode::Update, OutputMode::Complete],
        |_| {
            "a running aggregate is never final, so it cannot be appended (Spark: \"Append output mode not supported \
             when there are streaming aggregations on streaming DataFrames/DataSets without watermark\"); use \
             \"update\" or \"complete\", or a [stage.window] to append closed windows"
                .into()
        },
    )?;
    Ok(AggregateSpec {
        group_by: spec.group_by.clone(),
        aggregates: aggregates(at, key, &spec.aggregates, &spec.group_by, &[])?,
        output_mode,
        max_complete_rows: max_complete_rows(at, key, spec.max_complete_rows.as_ref())?,
    })
}

/// The aggregates of `list`, each output column named once (not as a group column nor
/// a `reserved` one).
fn aggregates(
    at: &Locator,
    key: &str,
    list: &Spanned<Vec<String>>,
    group_by: &[String],
    reserved: &[&str],
) -> Result<Vec<Aggregate>> {
    if list.get_ref().is_empty() {
        return Err(at.at(list, &format!("{key}.aggregates"), "expected at least one aggregate, e.g. \"count\""));
    }
    let mut aggregates: Vec<Aggregate> = Vec::new();
    for text in list.get_ref() {
        let aggregate = parse_aggregate(text).map_err(|problem| at.at(list, &format!("{key}.aggregates"), problem))?;
        if aggregates.iter().any(|a| a.name == aggregate.name)
            || group_by.contains(&aggregate.name)
            || reserved.contains(&aggregate.name.as_str())
        {
            return Err(at.at(
                list,
                &format!("{key}.aggregates"),
                format!("two output columns are named '{}'; rename one with `as`", aggregate.name),
            ));
        }
        aggregates.push(aggregate);
    }
    Ok(aggregates)
}

fn max_complete_rows(at: &Locator, key: &str, max: Option<&Spanned<u64>>) -> Result<u64> {
    max.map_or(Ok(DEFAULT_MAX_COMPLETE_ROWS), |n| positive_number(at, n, &format!("{key}.max-complete-rows"), "number"))
}

/// `count`, `count(*)`, `count(col)`, `sum(col)`, `min(col)`, `max(col)`, `avg(col)`,
/// each optionally followed by `as name` (default: `count`, `sum_col`, …).
pub fn parse_aggregate(text: &str) -> std::result::Result<Aggregate, String> {
    let (call, alias) = match text.split_once(" as ") {
        Some((call, alias)) => (call.trim(), Some(alias.trim().to_string())),
        None => (text.trim(), None),
    };
    let (function_name, column) = match call.split_once('(') {
        Some((name, rest)) => {
            let column = rest.strip_suffix(')').ok_or_else(|| format!("'{text}': expected `function(column)`"))?.trim();
            (name.trim(), if column == "*" || column.is_empty() { None } else { Some(column.to_string()) })
        }
        None => (call, None),
    };
    let function = match function_name.to_ascii_lowercase().as_str() {
        "mean" => AggregateFn::Avg,
        other => AggregateFn::from_name(other)
            .ok_or_else(|| format!("'{text}': unknown aggregate '{other}'; expected count, sum, min, max or avg"))?,
    };
    if function != AggregateFn::Count && column.is_none() {
        return Err(format!("'{text}': {function_name} needs a column, e.g. {function_name}(amount)"));
    }
    let name = alias.unwrap_or_else(|| match &column {
        None => "count".to_string(),
        Some(column) => format!("{}_{column}", function_name.to_ascii_lowercase()),
    });
    if name.is_empty() {
        return Err(format!("'{text}': the name after `as` is empty"));
    }
    Ok(Aggregate { function, column, name })
}
