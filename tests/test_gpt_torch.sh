#!/bin/sh
# rumor's GPT against PyTorch (tests/test_gpt_torch.py): the same loss,
# gradients and AdamW steps from the same checkpoint; skipped (77) where
# PyTorch is missing. Debian's python3 is used when present (python3-torch
# installs there), else the first python3 on PATH.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
: "${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}"
py=${RUMOR_PYTHON:-}
[ -n "$py" ] || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3 || py=python3; }
"$py" -c "import torch" 2>/dev/null || skip "PyTorch is not installed for $py (apt-get install python3-torch)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$RUMOR_BUILDDIR/tests/gpt_ref" "$tmp" || { echo "FAIL: gpt_ref" >&2; exit 1; }
"$py" "$RUMOR_SRCDIR/tests/test_gpt_torch.py" "$tmp"
