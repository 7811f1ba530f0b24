#!/usr/bin/env bash
# Runs every fuzz target of build/fuzz for a while. Each target writes its own seed inputs into
# its corpus folder (MINFER_FUZZ_SEED_DIR) before fuzzing starts.
# Usage: scripts/fuzz.sh [SECONDS_FOR_GGUF]   (the other targets get a third of that)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
status=0
for target in build/fuzz/fuzz/fuzz_*; do
    [[ -x $target ]] || continue
    name=$(basename "$target")
    corpus=build/fuzz/corpus/$name
    artifacts=build/fuzz/artifacts/$name
    mkdir -p "$corpus" "$artifacts"
    t=$seconds
    [[ $name == fuzz_gguf ]] || t=$(( (seconds + 2) / 3 ))
    log=build/fuzz/$name.log
    MINFER_FUZZ_SEED_DIR=$corpus "$target" -max_total_time="$t" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" || echo "?")
    if [[ $rc -ne 0 ]]; then
        echo "fuzz: $name FAILED after $execs executions (exit $rc); artifacts in $artifacts:"
        grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -20
        status=1
    else
        echo "fuzz: $name ran ${t}s, $execs executions, no findings"
    fi
done
exit $status
