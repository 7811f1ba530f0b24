#!/usr/bin/env bash
# Runs minfer's whole test suite: the unit and integration tests (release build, then the smallest
# models again under ASan + UBSan) and a short run of every fuzz target.
# Run scripts/setup.sh first. FUZZ_SECONDS (default 60 for the GGUF reader, a third of it for the
# others) shortens or lengthens the fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== unit and integration tests (release)"
cmake --build --preset release
ctest --preset release

echo "== fuzz smoke runs (clang, libFuzzer + ASan + UBSan)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
echo "test: all passed"
