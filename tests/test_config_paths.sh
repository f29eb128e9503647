#!/bin/sh
# Relative paths in a config file (-c FILE) are taken from the file's
# directory, as a systemd unit with WorkingDirectory=/var/lib/rumor and its
# INI in /etc/rumor needs; paths on the command line stay relative to the
# working directory. Here the INI files live in $tmp/etc and every command
# runs in $tmp/work:
#   - rumor-train: data (text:A,B), checkpoint-dir, metrics, trace and
#     resume from the file; metrics = - is still standard output; a missing
#     file is named where it was looked for; a bare data directory next to
#     the file (and the name fashion-mnist, which is none) when Fashion-MNIST
#     is here;
#   - rumor-peer: peers-file, keys, allow, topology = file:EDGES, peer-keys
#     (.pub files and a Z85 key), data, metrics and checkpoint-dir from the
#     file: a peer of a 2-peer list whose neighbour never starts trains its
#     rounds (--allow-alone), so it read every one of them;
#   - flags on the command line (--metrics, --checkpoint-dir, --data,
#     --peers-file) are read from the working directory.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
: "${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}"
text=/usr/share/common-licenses/GPL-3
[ -f "$text" ] || skip "no $text (base-files)"
[ -r /proc/net/tcp ] || skip "no /proc/net/tcp to find free ports in"
train="$RUMOR_BUILDDIR/rumor-train"
peer="$RUMOR_BUILDDIR/rumor-peer"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
etc=$tmp/etc
work=$tmp/work
mkdir -p "$etc" "$work"
head -c 20000 "$text" >"$etc/a.txt"
tail -c 20000 "$text" >"$etc/b.txt"
cd "$work" || exit 99

# nothing_here WHAT: the working directory is still empty
nothing_here() {
  [ -z "$(ls -A "$work")" ] || fail "$1 wrote into the working directory: $(ls -A "$work" | tr '\n' ' ')"
  rm -rf "${work:?}"/* "$work"/.[!.]* 2>/dev/null
}

# ---- rumor-train
lm="model = gpt:layers=1,dim=16,heads=2,ctx=16
batch = 4
eval-every = 2"
cat >"$etc/train.ini" <<EOF
[data]
data = text:a.txt,b.txt
[training]
$lm
steps = 4
[output]
checkpoint-dir = ckpt
metrics = run.jsonl
trace = run.trace.json
EOF
# a relative -c path: the file's directory is ../etc
timeout 120 "$train" -c ../etc/train.ini -q >"$tmp/train.log" 2>&1
expect_rc 0 $? "rumor-train -c ../etc/train.ini (data, checkpoint-dir, metrics, trace)" "$tmp/train.log"
[ -f "$etc/ckpt/train-r0-000000000004.safetensors" ] ||
  fail "checkpoint-dir = ckpt: no checkpoint in $etc/ckpt: $(ls "$etc/ckpt" 2>&1)"
grep -q '"event":"done"' "$etc/run.jsonl" 2>/dev/null || fail "metrics = run.jsonl: nothing in $etc/run.jsonl"
[ -s "$etc/run.trace.json" ] || fail "trace = run.trace.json: no $etc/run.trace.json"
grep -q '"data":"text: 2 files' "$etc/run.jsonl" 2>/dev/null ||
  fail "data = text:a.txt,b.txt: the run did not read both files"
nothing_here "rumor-train -c ../etc/train.ini"

# resume from the file, the checkpoint named relative to it
cat >"$etc/resume.ini" <<EOF
data = text:a.txt,b.txt
$lm
steps = 6
resume = ckpt/train-r0-000000000004.safetensors
metrics = resumed.jsonl
EOF
timeout 120 "$train" -c "$etc/resume.ini" -q >"$tmp/resume.log" 2>&1
expect_rc 0 $? "resume = ckpt/...safetensors from the file" "$tmp/resume.log"
grep -q '"event":"done"' "$etc/resumed.jsonl" 2>/dev/null || fail "the resumed run wrote no $etc/resumed.jsonl"
nothing_here "the resumed run"

# metrics = - is standard output, not a file named - next to the INI
printf 'data = text:a.txt\n%s\nsteps = 2\nmetrics = -\n' "$lm" >"$etc/stdout.ini"
timeout 120 "$train" -c "$etc/stdout.ini" -q >"$tmp/stdout.log" 2>&1
expect_rc 0 $? "metrics = -" "$tmp/stdout.log"
grep -q '"event":"start"' "$tmp/stdout.log" || fail "metrics = -: no events on standard output"
[ ! -e "$etc/-" ] || fail "metrics = -: wrote a file named '-' next to the INI"
nothing_here "metrics = -"

# a missing file is named where it was looked for: next to the INI
printf 'data = text:missing.txt\n%s\nsteps = 2\n' "$lm" >"$etc/missing.ini"
run_expect 1 "$etc/missing.txt" timeout 120 "$train" -c "$etc/missing.ini" -q

# flags on the command line: relative to the working directory, the file's
# paths for the rest
cp "$etc/a.txt" "$work/local.txt"
timeout 120 "$train" -c "$etc/train.ini" --data text:local.txt --metrics cli.jsonl \
  --checkpoint-dir cli-ckpt -q >"$tmp/cli.log" 2>&1
expect_rc 0 $? "flags with relative paths over the file's" "$tmp/cli.log"
[ -f "$work/cli-ckpt/train-r0-000000000004.safetensors" ] ||
  fail "--checkpoint-dir cli-ckpt: not in the working directory: $(ls "$work" 2>&1)"
grep -q '"event":"done"' "$work/cli.jsonl" 2>/dev/null || fail "--metrics cli.jsonl: not in the working directory"
[ ! -e "$etc/cli.jsonl" ] && [ ! -e "$etc/cli-ckpt" ] || fail "a flag's relative path was taken from the INI's directory"
rm -rf "${work:?}"/*

# a bare data directory next to the file, and the name fashion-mnist (no
# file of that name there: Debian's directory, as before)
FASHION=${RUMOR_DATA:-/usr/share/datasets/fashion-mnist}
if [ -f "$FASHION/train-images-idx3-ubyte.gz" ]; then
  ln -s "$FASHION" "$etc/fmnist"
  for d in fmnist fashion-mnist; do
    printf 'data = %s\ntrain-limit = 256\nsteps = 2\nbatch = 64\nmetrics = %s.jsonl\n' "$d" "$d" \
      >"$etc/$d.ini"
    timeout 120 "$train" -c "$etc/$d.ini" -q >"$tmp/$d.log" 2>&1
    expect_rc 0 $? "data = $d" "$tmp/$d.log"
  done
  grep -q "$etc/fmnist" "$etc/fmnist.jsonl" "$tmp/fmnist.log" ||
    fail "data = fmnist: the directory next to the INI was not the one read"
  nothing_here "data = fmnist"
else
  echo "note: no Fashion-MNIST in $FASHION: a bare data directory not checked" >&2
fi

# ---- rumor-peer: a 2-peer swarm whose peer 1 never starts
mkdir "$etc/keys"
for r in 0 1; do
  "$peer" keygen "$etc/keys/peer-$r" >/dev/null 2>&1 || fail "rumor-peer keygen $etc/keys/peer-$r"
done
free_endpoints 2 | tr ',' '\n' >"$etc/peers.txt"
echo "0 1" >"$etc/edges.txt"
z85=$(sed -n 's/^public-key = "\(.*\)"$/\1/p' "$etc/keys/peer-0.pub")
[ ${#z85} -eq 40 ] || fail "no Z85 key in $etc/keys/peer-0.pub"
cat >"$etc/peer.ini" <<EOF
[swarm]
peers-file = peers.txt
topology = file:edges.txt
keys = keys/peer-0.key
allow = keys
[training]
data = text:a.txt
$lm
metrics = peer.jsonl
EOF
# (a checkpoint directory once: a run after it would resume at its end)
cp "$etc/peer.ini" "$etc/peer-ckpt.ini"
echo "checkpoint-dir = peer-ckpt" >>"$etc/peer-ckpt.ini"
alone="--rank 0 --start-timeout 1 --round-timeout 0.3 --rounds 2 --allow-alone --no-average -q"
# shellcheck disable=SC2086
timeout 120 "$peer" -c "$etc/peer-ckpt.ini" $alone >"$tmp/peer.log" 2>&1
expect_rc 0 $? "rumor-peer -c $etc/peer-ckpt.ini (peers-file, keys, allow, topology file:)" \
  "$tmp/peer.log"
grep -q '"event":"done"' "$etc/peer.jsonl" 2>/dev/null || fail "metrics = peer.jsonl: nothing in $etc/peer.jsonl"
ls "$etc/peer-ckpt/"*.safetensors >/dev/null 2>&1 || fail "checkpoint-dir = peer-ckpt: none in $etc/peer-ckpt"
nothing_here "rumor-peer -c peer.ini"

# peer-keys: .pub files next to the INI, and a Z85 key among them (the
# other files named by absolute flags: only peer-keys is read from the INI)
for keys in "keys/peer-0.pub,keys/peer-1.pub" "$z85,keys/peer-1.pub"; do
  { cat "$etc/peer.ini"; echo "peer-keys = $keys"; } >"$etc/peer-keys.ini"
  # shellcheck disable=SC2086
  timeout 120 "$peer" -c "$etc/peer-keys.ini" --peers-file "$etc/peers.txt" \
    --keys "$etc/keys/peer-0.key" --allow "$etc/keys" $alone >"$tmp/peer-keys.log" 2>&1
  expect_rc 0 $? "peer-keys = $keys" "$tmp/peer-keys.log"
done
nothing_here "peer-keys"

# a peers file's key column: a Z85 key, and a .pub file beside the peers
# file, wherever the peer runs
e0=$(sed -n 1p "$etc/peers.txt") e1=$(sed -n 2p "$etc/peers.txt")
printf '%s %s\n%s keys/peer-1.pub\n' "$e0" "$z85" "$e1" >"$etc/peers-keys.txt"
# shellcheck disable=SC2086
timeout 120 "$peer" -c "$etc/peer.ini" --peers-file "$etc/peers-keys.txt" $alone \
  >"$tmp/peer-col.log" 2>&1
expect_rc 0 $? "a peers file whose second column names keys/peer-1.pub beside it" "$tmp/peer-col.log"
nothing_here "the peers file's key column"

# the peers file and the metrics on the command line: the working directory
cp "$etc/peers.txt" "$work/cli-peers.txt"
# shellcheck disable=SC2086
timeout 120 "$peer" -c "$etc/peer.ini" --peers-file cli-peers.txt --metrics cli-peer.jsonl $alone \
  >"$tmp/peer-cli.log" 2>&1
expect_rc 0 $? "--peers-file cli-peers.txt --metrics cli-peer.jsonl" "$tmp/peer-cli.log"
grep -q '"event":"done"' "$work/cli-peer.jsonl" 2>/dev/null ||
  fail "--metrics cli-peer.jsonl: not in the working directory"
# shellcheck disable=SC2086
run_expect 2 "peers file 'missing-peers.txt'" timeout 60 "$peer" -c "$etc/peer.ini" \
  --peers-file missing-peers.txt $alone

finish
