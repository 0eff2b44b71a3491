# Sourced by the benchmark scripts. running_count_pipeline FILE NAME [MAX_FILES]
# [SOURCE_LINES] [OPERATOR_LINES] writes a pipeline reading JSON-lines purchases
# (`user STRING, amount BIGINT`) from `input/` next to FILE (at most MAX_FILES files
# per batch when given) through the running-count processor to Parquet part files in
# `out/`, under available-now; SOURCE_LINES and OPERATOR_LINES are added to the
# [[source]] and [operator] tables (e.g. to raise a per-batch limit).
running_count_pipeline() {
  local file=$1 name=$2 max_files=${3:-} source_lines=${4:-} operator_lines=${5:-}
  cat > "$file" <<TOML
name = "$name"

[[source]]
format = "json"
path = "input"
$([ -n "$max_files" ] && echo "max-files-per-trigger = $max_files")
$source_lines
schema = "user STRING, amount BIGINT"

[operator]
module = "$PWD/build/wasm/running_count.wasm"
key = ["user"]
output-mode = "update"
$operator_lines

$(parquet_sink_available_now)
TOML
}

# The [sink] and [trigger] every benchmark pipeline ends with: Parquet part files in
# `out/`, available-now.
parquet_sink_available_now() {
  cat <<TOML
[sink]
format = "parquet"
path = "out"

[trigger]
available-now = true
TOML
}
