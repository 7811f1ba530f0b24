#!/usr/bin/env bash
# Runs minfer's whole test suite (docs/testing.md): the unit and integration tests (release
# build), the Vulkan backend's, the server's tests in Node (tests/server/node), the commands of
# the README and docs/ (scripts/check-docs.py), the kernel and parity tests cross-built for 64-bit
# ARM and run under QEMU (scripts/test-aarch64.sh), a short run of every fuzz target, and the unit
# and integration tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
# Run scripts/setup.sh first. FUZZ_SECONDS (default 60 for the GGUF reader, a third of it for the
# others) shortens or lengthens the fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's header says how long the run has taken so far (CI's budget: docs/testing.md).
stage() { echo "== $* ($(date -u +%H:%M:%S), ${SECONDS} s in)"; }

stage "unit and integration tests (release)"
cmake --build --preset release
ctest --preset release -LE vulkan

stage "the Vulkan backend on Mesa's lavapipe, with the Khronos validation layer"
ctest --preset release -L vulkan

stage "server tests: minfer serve with the real openai npm client, raw sockets, a browser, nginx"
node --test --test-concurrency=1 tests/server/node/*.test.mjs

stage "the reader's test: the README's and docs/' commands as written, their links"
scripts/check-docs.py

stage "aarch64: cross-built, the kernel and parity tests under QEMU as three ARM CPUs"
if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null; then
    scripts/test-aarch64.sh
elif [ "${CI:-}" = true ]; then
    echo "test: the aarch64 cross compiler or qemu-aarch64 is missing (scripts/setup.sh installs them)" >&2
    exit 1
else
    echo "test: skipped: no aarch64 cross compiler or qemu-aarch64 (scripts/setup.sh installs them)"
fi

stage "fuzz smoke runs (clang, libFuzzer + ASan + UBSan)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
stage "unit and integration tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# Left out (docs/testing.md, "Sanitizers"), to keep this stage near 10 minutes on 2 cores: the
# Vulkan tests (the release stage runs them on lavapipe, whose JIT is not instrumented); the
# reference backend's parity (plain loops, 5 minutes under ASan); batch mixing of the f16 models,
# of unpacked weights and of gemma2's 26 layers, and golden parity of the f16 models and on one
# thread (their kernels are under ASan in the matmul tests of every type, their graphs in the
# q8_0 models' runs and on two threads); and the three tests that cap the address space, which
# ASan's shadow memory (terabytes reserved) cannot live under.
asan_left_out='ReferenceBackendParity|BatchMixing.*(_f16_|norepack|gemma2)|Golden/Parity.*(_f16_|_t1( |$))'
asan_left_out+='|^Memory\.|ChatRefusesAStdinThatIsADirectoryOrEndless'
# -ngl's command-line test runs a model on lavapipe, whose driver leaks under LeakSanitizer (as
# the Vulkan stage's tests would); the release stage runs it.
asan_left_out+='|GpuLayersFlag'
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -LE vulkan -E "$asan_left_out"
echo "test: all passed in ${SECONDS} s"
