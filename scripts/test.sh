#!/usr/bin/env bash
# Runs minfer's whole test suite (docs/testing.md): the unit and integration tests (release
# build), the Vulkan backend's, the server's tests in Node (tests/server/node), the commands of
# the README and docs/ (scripts/check-docs.py) and a short run of every fuzz target.
# Run scripts/setup.sh first. FUZZ_SECONDS (default 60 for the GGUF reader, a third of it for the
# others) shortens or lengthens the fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== unit and integration tests (release)"
cmake --build --preset release
ctest --preset release -LE vulkan

echo "== the Vulkan backend on Mesa's lavapipe, with the Khronos validation layer"
ctest --preset release -L vulkan

echo "== server tests: minfer serve with the real openai npm client, raw sockets, a browser, nginx"
node --test --test-concurrency=1 tests/server/node/*.test.mjs

echo "== the reader's test: the README's and docs/' commands as written, their links"
scripts/check-docs.py

echo "== fuzz smoke runs (clang, libFuzzer + ASan + UBSan)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
echo "test: all passed"
