# Sourced by the benchmark scripts. running_count_pipeline FILE NAME [MAX_FILES]
# writes a pipeline reading JSON-lines purchases (`user STRING, amount BIGINT`) from
# `input/` next to FILE (at most MAX_FILES files per batch when given) through the
# running-count processor to Parquet part files in `out/`, under available-now.
running_count_pipeline() {
  local file=$1 name=$2 max_files=${3:-}
  cat > "$file" <<TOML
name = "$name"

[[source]]
format = "json"
path = "input"
$([ -n "$max_files" ] && echo "max-files-per-trigger = $max_files")
schema = "user STRING, amount BIGINT"

[operator]
module = "$PWD/build/wasm/running_count.wasm"
key = ["user"]
output-mode = "update"

[sink]
format = "parquet"
path = "out"

[trigger]
available-now = true
TOML
}
