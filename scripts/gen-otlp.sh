#!/bin/sh
# Regenerates MockServer/OutboxMock/Vendors/OTLP/Generated/ from the .proto files in Fixtures/otlp-proto/.
# Run by hand when the protos change, never from `make test`: building the protoc plugin takes minutes, so the
# generated code is committed.
#
# Where the protos come from (copied verbatim, each with its repository's LICENSE beside it, Apache-2.0):
#   opentelemetry/  open-telemetry/opentelemetry-proto at tag v1.11.0,
#                   commit 790608c4d51e6ffc12210b541e8514cbed9e91a4 (only the logs, traces and metrics services)
#   google/rpc/     googleapis/googleapis commit f8291d2b89f0017ab078a4c7378069bae5686f6f (status.proto: the
#                   body of OTLP/HTTP's error responses)
#
# Needs: protoc (Debian: `apt-get install protobuf-compiler`, whose /usr/include has google/protobuf/any.proto)
# and protoc-gen-swift of swift-protobuf at the version Package.swift names, built here in its own scratch path.
set -eu

SWIFT_PROTOBUF_VERSION=1.39.0
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.build/gen-otlp"
out="$root/MockServer/OutboxMock/Vendors/OTLP/Generated"
protos="$root/Fixtures/otlp-proto"

command -v protoc >/dev/null || { echo "gen-otlp: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }
mkdir -p "$work"
if [ ! -d "$work/swift-protobuf" ]; then
    git clone -q --branch "$SWIFT_PROTOBUF_VERSION" https://github.com/apple/swift-protobuf "$work/swift-protobuf"
fi
(cd "$work/swift-protobuf" && swift build --product protoc-gen-swift --scratch-path "$work/build")
plugin="$work/build/debug/protoc-gen-swift"

rm -rf "$out"
mkdir -p "$out"
cd "$protos"
protoc --plugin=protoc-gen-swift="$plugin" \
    --swift_opt=FileNaming=PathToUnderscores --swift_opt=Visibility=Internal \
    --swift_out="$out" -I . -I /usr/include \
    google/rpc/status.proto \
    opentelemetry/proto/common/v1/common.proto \
    opentelemetry/proto/resource/v1/resource.proto \
    opentelemetry/proto/logs/v1/logs.proto \
    opentelemetry/proto/trace/v1/trace.proto \
    opentelemetry/proto/metrics/v1/metrics.proto \
    opentelemetry/proto/collector/logs/v1/logs_service.proto \
    opentelemetry/proto/collector/trace/v1/trace_service.proto \
    opentelemetry/proto/collector/metrics/v1/metrics_service.proto
echo "gen-otlp: wrote $(ls "$out" | wc -l) files to $out"
