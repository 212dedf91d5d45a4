#!/usr/bin/env bash
# Generate every SDK under sdks/ from protos/ (the public packages; agentmesh/internal/ is not).
#
#   scripts/gen_sdks.sh           regenerate sdks/go/gen/ (committed), build sdks/typescript/,
#                                 sdks/rust/ and sdks/java/ (their generated code is a build output,
#                                 not committed)
#   scripts/gen_sdks.sh --check   regenerate the Go SDK's code into a temporary directory and fail
#                                 when it differs from the committed sdks/go/gen/
#
# Generation runs buf (pinned in package-lock.json files) with local plugins only: the TypeScript
# plugin from sdks/typescript/node_modules, the Go plugins as sdks/go's go.mod `tool`s. The Rust SDK
# generates in its build.rs (tonic-prost-build, vendored protoc), the Java SDK in its Maven build
# (protoc and protoc-gen-grpc-java as pinned Maven Central artifacts). Needs node and npm, Go 1.25+,
# cargo, Maven 3.8+ and a JDK 17+; npm ci, the Go module proxy, crates.io and Maven Central are the
# only downloads.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
check=false
[[ ${1:-} == --check ]] && check=true

npm_ci() {
    # --ignore-scripts: buf's postinstall only swaps its launcher for the native binary.
    (cd "$1" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
}

# sdks/typescript pins buf (the same version as the root's package.json) and protoc-gen-es.
ts=sdks/typescript
if [[ ! -x $ts/node_modules/.bin/buf ]] || ! cmp -s "$ts/package-lock.json" "$ts/node_modules/.installed-package-lock.json" 2>/dev/null; then
    echo "gen_sdks: npm ci in $ts"
    npm_ci "$ts"
    cp "$ts/package-lock.json" "$ts/node_modules/.installed-package-lock.json"
fi
buf=$root/$ts/node_modules/.bin/buf

if $check; then
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    (cd sdks/go && "$buf" generate --output "$out")
    if ! diff -r "$out/gen" sdks/go/gen; then
        echo "gen_sdks: sdks/go/gen/ is stale; run \`make sdks\` and commit the result" >&2
        exit 1
    fi
    echo "gen_sdks: sdks/go/gen/ matches protos/"
    exit 0
fi

echo "gen_sdks: Go (sdks/go/gen/)"
(cd sdks/go && "$buf" generate && go build ./...)
echo "gen_sdks: TypeScript (sdks/typescript/dist/)"
(cd "$ts" && npm run --silent build)
echo "gen_sdks: Rust (sdks/rust/target/)"
(cd sdks/rust && cargo build --locked --quiet)
echo "gen_sdks: Java (sdks/java/target/)"
(cd sdks/java && mvn --quiet --batch-mode -DskipTests package)
