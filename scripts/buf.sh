#!/usr/bin/env bash
# Lint the protos with buf and check them for breaking changes.
#
# buf comes from npm (@bufbuild/buf, pinned in package.json / package-lock.json) and is installed
# into node_modules/. Everything after that install runs offline: the protos import google/protobuf
# well-known types, which buf has built in, and google/rpc/status.proto, vendored under
# protos/google/ (exempt from lint and breaking rules in buf.yaml).
#
# Breaking changes are checked against a git base when there is one:
#   - on a branch other than main: against main;
#   - on main itself (CI clones main): against the previous commit, HEAD~1;
#   - no commits yet, a shallow clone without HEAD~1, or no protos at the base: skipped, with a message.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

buf=node_modules/.bin/buf
pinned=$(node -p 'require("./package-lock.json").packages["node_modules/@bufbuild/buf"].version')
if [[ ! -x $buf ]] || [[ "$("$buf" --version 2>/dev/null)" != "$pinned" ]]; then
    echo "buf.sh: installing buf $pinned from npm"
    # The package's postinstall only swaps its launcher for the native binary; the launcher works.
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
fi

echo "buf.sh: buf $("$buf" --version) lint"
"$buf" lint

skip_breaking() {
    echo "buf.sh: breaking check skipped: $1"
    exit 0
}

git rev-parse --is-inside-work-tree >/dev/null 2>&1 || skip_breaking "not a git work tree"
head=$(git rev-parse --verify --quiet 'HEAD^{commit}') || skip_breaking "no commits yet"
main=$(git rev-parse --verify --quiet 'refs/heads/main^{commit}' || true)

if [[ -n $main && $main != "$head" ]]; then
    base_name=main
    base=$main
else
    base_name=HEAD~1
    base=$(git rev-parse --verify --quiet 'HEAD~1^{commit}') ||
        skip_breaking "HEAD has no parent commit here (first commit or shallow clone)"
fi

git cat-file -e "$base:protos" 2>/dev/null || skip_breaking "$base_name has no protos/"
if git diff --quiet "$base" -- protos && [[ -z $(git ls-files --others --exclude-standard protos) ]]; then
    skip_breaking "protos/ unchanged since $base_name"
fi

# subdir=protos makes the base's module root match this one's even when the base predates buf.yaml.
# A breaking change made on purpose (a new major contract version, noted in the README changelog) is
# listed, message for message, in buf.breaking-accepted.txt; anything else breaking fails.
echo "buf.sh: buf breaking against $base_name (${base:0:12})"
if ! found=$("$buf" breaking protos --against ".git#ref=$base,subdir=protos" --error-format json); then
    node -e '
        const fs = require("fs");
        const accepted = new Set(fs.readFileSync("buf.breaking-accepted.txt", "utf8").split("\n")
            .filter((line) => line && !line.startsWith("#")));
        const found = fs.readFileSync(0, "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line));
        const refused = found.filter((f) => !accepted.has(`${f.type}\t${f.message}`));
        for (const f of refused) console.error(`${f.path ?? "<input>"}:${f.start_line}:${f.start_column}:${f.message} (${f.type})`);
        console.log(`buf.sh: ${found.length - refused.length} breaking change(s) accepted in buf.breaking-accepted.txt`);
        process.exit(refused.length ? 1 : 0);
    ' <<<"$found"
fi
