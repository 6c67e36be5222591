#!/bin/sh
# Regenerates, from the .proto files in Fixtures/otlp-proto/: Sources/OTLPProto/ (the logs service and what it uses,
# public: the engine's OTLP destination and the mock share it) and MockServer/OutboxMock/Vendors/OTLP/Generated/
# (traces and metrics, the mock's alone, importing OTLPProto for the common types).
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

shared="$root/Sources/OTLPProto"
rm -rf "$out" "$shared"
mkdir -p "$out" "$shared"
cd "$protos"
protoc --plugin=protoc-gen-swift="$plugin" \
    --swift_opt=FileNaming=PathToUnderscores --swift_opt=Visibility=Public \
    --swift_out="$shared" -I . -I /usr/include \
    google/rpc/status.proto \
    opentelemetry/proto/common/v1/common.proto \
    opentelemetry/proto/resource/v1/resource.proto \
    opentelemetry/proto/logs/v1/logs.proto \
    opentelemetry/proto/collector/logs/v1/logs_service.proto
mappings="$work/module-mappings.asciipb"
cat > "$mappings" <<MAP
mapping {
  module_name: "OTLPProto"
  proto_file_path: "google/rpc/status.proto"
  proto_file_path: "opentelemetry/proto/common/v1/common.proto"
  proto_file_path: "opentelemetry/proto/resource/v1/resource.proto"
  proto_file_path: "opentelemetry/proto/logs/v1/logs.proto"
  proto_file_path: "opentelemetry/proto/collector/logs/v1/logs_service.proto"
}
MAP
protoc --plugin=protoc-gen-swift="$plugin" \
    --swift_opt=FileNaming=PathToUnderscores --swift_opt=Visibility=Internal \
    --swift_opt=ProtoPathModuleMappings="$mappings" \
    --swift_out="$out" -I . -I /usr/include \
    opentelemetry/proto/trace/v1/trace.proto \
    opentelemetry/proto/metrics/v1/metrics.proto \
    opentelemetry/proto/collector/trace/v1/trace_service.proto \
    opentelemetry/proto/collector/metrics/v1/metrics_service.proto
echo "gen-otlp: wrote $(ls "$shared" | wc -l) files to $shared and $(ls "$out" | wc -l) to $out"
