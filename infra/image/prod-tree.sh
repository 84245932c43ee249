#!/usr/bin/env bash
# Builds the production tree that the image runs, into the folder given (replaced if present):
# the workspace's package manifests and sources without tests, and production dependencies only.
# Node 24 runs the TypeScript sources as they are; it refuses to strip types under node_modules,
# so the workspace packages stay in packages/* (linked, never copied into node_modules).
# The Dockerfile runs this script, and so does test/deploy/image.test.ts: both get the same tree.
#   usage: infra/image/prod-tree.sh <out-dir>      (PNPM=<path> to choose the pnpm binary)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: prod-tree.sh <out-dir>}"
pnpm="${PNPM:-pnpm}"

rm -rf "$out"
mkdir -p "$out"
cp "$root"/package.json "$root"/pnpm-lock.yaml "$root"/pnpm-workspace.yaml "$root"/.npmrc "$out"/
# pnpm-workspace.yaml's patchedDependencies name these files; without them the install fails.
cp -R "$root"/patches "$out"/
for pkg in "$root"/packages/*/; do
  name="$(basename "$pkg")"
  mkdir -p "$out/packages/$name"
  cp "$pkg/package.json" "$out/packages/$name/"
  [ -d "$pkg/bin" ] && cp -R "$pkg/bin" "$out/packages/$name/"
  # Sources without tests, fixtures and benchmarks; .lua and .json files travel with them.
  (cd "$pkg" && find src -type f ! -name '*.test.ts' ! -name '*.fixture.ts' -print0 |
    xargs -0 -I{} install -D -m 0644 {} "$out/packages/$name/{}")
done
cd "$out"
# No lifecycle scripts: the only one is the dev-only `node` package's, and --prod skips it anyway.
"$pnpm" install --prod --frozen-lockfile --ignore-scripts --reporter=append-only >&2
