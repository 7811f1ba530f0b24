#!/usr/bin/env bash
# minfer for 64-bit ARM, on an x86-64 Debian 12 machine: cross-builds the `aarch64` preset and runs
# the kernel tests and the golden parity tests under QEMU's user-mode emulator as three CPUs:
#   cortex-a53   NEON only                    kernels "NEON"
#   neoverse-n1  + the dot product (sdot)     kernels "NEON DOTPROD"
#   max          + i8mm, SVE, SVE2 (512-bit)  kernels "SVE2 DOTPROD I8MM SVE512"
# The kernel tests check every kernel path against ggml's dequantization and, bit for bit, the
# dot-product kernels against the portable loops (as max, also with SVE's integer kernels, i8mm and
# then the dot product switched off, and the dot products once more on 256-bit SVE vectors);
# MINFER_EXPECT_KERNELS makes a CPU that ran other kernels than expected a failure.
# The parity tests run each golden model once in one batch, plus the greedy continuations (the
# by-token and micro-batch variants run the same kernels); as max they run with SVE off
# ("max,sve=off": NEON with sdot and i8mm), since QEMU emulates SVE so slowly that they would take
# over a quarter of an hour (the kernel tests run SVE's paths).
# scripts/test.sh runs this as a stage (about 13 minutes on 2 cores, cold build included).
#
# Needs (as root, once; scripts/setup.sh installs them): dpkg --add-architecture arm64 &&
#   apt-get update && apt-get install g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64
#   libpcre2-dev:arm64 libedit-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64
#   libgtest-dev:arm64 libgmock-dev:arm64
# Usage: scripts/test-aarch64.sh [CPU ...]   (default: all three)
# PARITY_FILTER (a gtest filter) widens or narrows the parity tests: 'Golden/*:StoriesParity.*' is all.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
    if ! command -v "$tool" >/dev/null; then
        echo "test-aarch64: $tool is missing (see this script's header for the packages)" >&2
        exit 1
    fi
done
if [ ! -e /usr/lib/aarch64-linux-gnu/libhwy.so ]; then
    echo "test-aarch64: the arm64 libraries are missing (libhwy-dev:arm64 and the rest: see this script's header)" >&2
    exit 1
fi

cmake --preset aarch64 >/dev/null
cmake --build --preset aarch64 --target minfer test_kernels test_model

declare -A expected=([cortex-a53]="NEON" [neoverse-n1]="NEON DOTPROD" [max]="SVE2 DOTPROD I8MM SVE512")
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(cortex-a53 neoverse-n1 max)
for cpu in "${cpus[@]}"; do
    if [ -z "${expected[$cpu]+set}" ]; then
        echo "test-aarch64: unknown CPU '$cpu' (cortex-a53, neoverse-n1 or max)" >&2
        exit 2
    fi
    echo "== qemu-aarch64 -cpu $cpu: $(QEMU_CPU=$cpu qemu-aarch64 build/aarch64/minfer --list-devices | grep -m1 cpu)"
    if [ "$cpu" = max ]; then
        # QEMU emulates SVE's integer kernels so slowly that the whole suite took 20 minutes with
        # them: it runs on 128-bit SVE (NEON's integer kernels, Highway's SVE2), and the SVE
        # kernels' bit-for-bit test on 512- and 256-bit vectors.
        QEMU_CPU=max,sve-default-vector-length=16 MINFER_EXPECT_KERNELS="SVE2_128 DOTPROD I8MM" \
            qemu-aarch64 build/aarch64/tests/test_kernels --gtest_brief=1
        for sve in "64 SVE2 DOTPROD I8MM SVE512" "32 SVE_256 DOTPROD I8MM SVE256"; do
            echo "== SVE's integer kernels on ${sve%% *}-byte vectors"
            QEMU_CPU=max,sve-default-vector-length=${sve%% *} MINFER_EXPECT_KERNELS="${sve#* }" \
                qemu-aarch64 build/aarch64/tests/test_kernels --gtest_brief=1 \
                --gtest_filter='ArmDotProducts.*:KernelsInUse.*'
        done
    else
        QEMU_CPU=$cpu MINFER_EXPECT_KERNELS="${expected[$cpu]}" \
            qemu-aarch64 build/aarch64/tests/test_kernels --gtest_brief=1
    fi
    parity_cpu=$cpu parity_kernels=${expected[$cpu]}
    [ "$cpu" = max ] && parity_cpu=max,sve=off parity_kernels="NEON DOTPROD I8MM"
    device=$(QEMU_CPU=$parity_cpu qemu-aarch64 build/aarch64/minfer --list-devices | grep -m1 cpu)
    echo "== parity as $parity_cpu: $device"
    if [[ "$device" != *"($parity_kernels;"* ]]; then
        echo "test-aarch64: as $parity_cpu minfer runs other kernels than $parity_kernels" >&2
        exit 1
    fi
    QEMU_CPU=$parity_cpu qemu-aarch64 build/aarch64/tests/test_model --gtest_brief=1 \
        --gtest_filter="${PARITY_FILTER:-Golden/Parity.*_batch_t2:Golden/GreedyParity.*:StoriesParity.*}"
done
echo "test-aarch64: passed on ${cpus[*]}"
