#!/usr/bin/env bash
# Builds Fuzz/outbox-fuzz (the libFuzzer harness of `make fuzz`) in .build-fuzz; prints the binary's path.
# SwiftPM links its executables with a `main` of its own, and `--sanitize=fuzzer` would link libFuzzer's as well, so
# the Swift code is instrumented through the frontend only (-Xfrontend -sanitize=fuzzer: edge counters, comparison
# tracing) and the C code with -fsanitize=fuzzer-no-link, and the harness's `@main` starts libFuzzer itself through
# LLVMFuzzerRunDriver from the toolchain's libclang_rt.fuzzer_no_main. AddressSanitizer on top: the parsers walk
# unsafe buffers, and libFuzzer's leak check (-detect_leaks) needs LeakSanitizer.
# Release (-O), with -enable-testing so that the harness still reaches the parsers' internal entry points
# (`@testable import`): a debug build ran the targets one to two orders of magnitude slower, too slow for
# FUZZ_RUNS inputs each. ASan stays on: the optimised build is fast enough with it.
# Usage: scripts/fuzz-build.sh   (SWIFT from the environment)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v "$swift")")")")
runtime=$(ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a 2>/dev/null | head -1)
if [[ -z "$runtime" ]]; then
  echo "fuzz-build: libclang_rt.fuzzer_no_main-x86_64.a not found under $toolchain/lib/clang" >&2
  exit 1
fi
cd "$root"
OUTBOX_FUZZ=1 "$swift" build -c release -Xswiftc -enable-testing --scratch-path "$root/.build-fuzz" --product outbox-fuzz --sanitize=address \
  -Xswiftc -Xfrontend -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
  -Xlinker "$runtime" -Xlinker -lstdc++ -Xlinker -lm -Xlinker -rpath -Xlinker "$toolchain/lib/swift/linux" >&2
echo "$root/.build-fuzz/release/outbox-fuzz"
