# Cross-compiling for 64-bit ARM Linux on a Debian x86-64 machine: GCC's aarch64 cross compiler
# (g++-aarch64-linux-gnu) and the arm64 builds of the libraries from Debian's multiarch
# (dpkg --add-architecture arm64; libhwy-dev:arm64 and the rest, which scripts/setup.sh installs).
# Programs built with it run under QEMU's user-mode emulator, `qemu-aarch64 PROGRAM` (QEMU_CPU
# picks the emulated CPU), with the arm64 C library of multiarch (libc6:arm64, /lib/aarch64-linux-gnu).
# Not with `-L /usr/aarch64-linux-gnu`: the cross toolchain's older libc there hangs threads.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: libraries and their CMake and pkg-config files under /usr/lib/aarch64-linux-gnu,
# headers shared in /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
