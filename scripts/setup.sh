#!/usr/bin/env bash
# Installs minfer's Debian build dependencies (idempotent) and builds the release preset.
# Run as root on a fresh Debian 12, or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    build-essential cmake ninja-build ccache pkg-config git
    clang libclang-rt-14-dev          # libFuzzer and the sanitizer runtimes
    libhwy-dev                        # Google Highway: SIMD with run-time dispatch
    nlohmann-json3-dev                # JSON: golden files, --json output
    libpcre2-dev                      # Unicode-aware regex for the pre-tokenizers
    libcli11-dev                      # command-line parsing
    libedit-dev                       # line editing for `minfer chat`
    libboost-dev                      # Boost.Asio + Boost.Beast: the HTTP server of `minfer serve`
    libvulkan-dev libvulkan-volk-dev glslc  # the Vulkan backend: headers, volk (opens the loader at
                                      # run time), GLSL -> SPIR-V at build time
    mesa-vulkan-drivers vulkan-validationlayers  # lavapipe, Mesa's Vulkan device on the CPU, and the
                                      # Khronos validation layer: the Vulkan tests run on every machine
    libcurl4-openssl-dev              # downloads: hf:, ollama: and URL references (TLS, proxies, ranges)
    libssl-dev                        # OpenSSL's libcrypto: SHA-256 of downloads at disk speed
    libjs-marked node-dompurify libjs-highlight.js  # the chat page renders answers with these
                                      # (Markdown, sanitising, code), compiled into minfer
    chromium                          # the chat page's test in a real (headless) browser
    nginx                             # the replicas test behind a load balancer
    libgtest-dev libgmock-dev libbenchmark-dev
    python3 python3-numpy             # ../shared/tools/reference_forward.py; python3 also plays the
                                      # hub and registry in tests/hub (fake_hub.py, standard library)
)

# On x86-64, 64-bit ARM too (docs/testing.md, "aarch64 under QEMU"): the cross compiler, the arm64
# builds of the libraries above from Debian's multiarch, and QEMU's user-mode emulator, which runs
# the cross-built tests as three ARM CPUs. (Installing libssl-dev:arm64 brings the amd64 libssl to
# the same version.) An ARM machine builds natively with the packages above.
cross_arm64=false
if [[ $(dpkg --print-architecture) == amd64 ]]; then
    cross_arm64=true
    packages+=(
        g++-aarch64-linux-gnu qemu-user
        libhwy-dev:arm64 libpcre2-dev:arm64 libedit-dev:arm64 libcurl4-openssl-dev:arm64
        libssl-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
    )
fi

# Node.js and npm run the server's tests with the real `openai` npm client; a Node already on the
# machine (e.g. NodeSource's, which bundles npm) is used as it is.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    if $cross_arm64 && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        "${sudo_cmd[@]}" dpkg --add-architecture arm64
    fi
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The server tests' npm packages, pinned by tests/server/node/package-lock.json.
npm ci --prefix tests/server/node --no-audit --no-fund --loglevel=error

cmake --preset release
cmake --build --preset release
echo "setup: built build/release/minfer"
