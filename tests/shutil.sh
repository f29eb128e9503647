# Helpers for rumor's shell tests (sourced). Tests exit 0 pass, 1 fail, 77 skip.
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

skip() {
  echo "SKIP: $*" >&2
  exit 77
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}

# Fashion-MNIST from $RUMOR_DATA or Debian's dataset-fashion-mnist.
need_fashion() {
  FASHION=${RUMOR_DATA:-/usr/share/datasets/fashion-mnist}
  [ -f "$FASHION/train-images-idx3-ubyte.gz" ] ||
    skip "Fashion-MNIST not found in $FASHION (apt-get install dataset-fashion-mnist)"
  : "${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}"
  # Tests that train run one at a time even under make -j: their timing
  # bounds (deadlines, detection times) assume the cores are theirs.
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$RUMOR_BUILDDIR/.training-tests.lock"
    flock 9
  fi
}

# expect_rc WANT GOT WHAT [LOGFILE]
expect_rc() {
  if [ "$2" -ne "$1" ]; then
    fail "$3: exit status $2, expected $1"
    [ -n "${4:-}" ] && sed 's/^/  | /' "$4" | tail -20 >&2
  fi
  return 0
}

expect_num_ge() { awk "BEGIN{exit !($1 >= $2)}" || fail "$3: $1 < $2"; }
expect_num_le() { awk "BEGIN{exit !($1 <= $2)}" || fail "$3: $1 > $2"; }
expect_num_lt() { awk "BEGIN{exit !($1 < $2)}" || fail "$3: $1 >= $2"; }
expect_num_close() {
  awk "BEGIN{d=$1-$2; if (d<0) d=-d; exit !(d <= $3)}" || fail "$4: $1 vs $2 (tolerance $3)"
}

# expect_count FILE PATTERN N: PATTERN occurs on exactly N lines.
expect_count() {
  n=$(grep -c -- "$2" "$1")
  [ "$n" -eq "$3" ] || fail "$1: $n lines with $2, expected $3"
}

# run_expect RC SUBSTRING CMD...: CMD exits RC and its stderr+stdout contains
# SUBSTRING; a signal death (rc > 128) is always a failure.
run_expect() {
  want=$1; substr=$2; shift 2
  out=$("$@" 2>&1 </dev/null)
  rc=$?
  if [ $rc -gt 128 ]; then
    fail "$*: killed by signal $((rc - 128))"
  elif [ $rc -ne "$want" ]; then
    fail "$*: exit status $rc, expected $want; output: $(echo "$out" | tail -3)"
  elif ! printf '%s' "$out" | grep -qF -- "$substr"; then
    fail "$*: output lacks '$substr': $(echo "$out" | tail -3)"
  fi
  return 0
}

# free_endpoints N: N loopback endpoints on free ports below Linux's
# ephemeral range (32768-60999), where outgoing connections take their ports.
# listening_ports: the TCP ports something listens on (IPv4 and IPv6), one a
# line, from /proc (no iproute2 needed: GPU machines may lack it).
listening_ports() {
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk '$4 == "0A" { n = split($2, a, ":"); print a[n] }' |
    while read -r _h; do printf '%d\n' "0x$_h"; done
}
free_endpoints() {
  _n=$1; _list=; _i=0; _tries=0
  _busy=$(listening_ports | tr '\n' ' ')
  while [ $_i -lt "$_n" ]; do
    _p=$(( 10000 + $(od -An -N2 -tu2 /dev/urandom) % 22000 ))
    _tries=$((_tries + 1)); [ $_tries -lt 1000 ] || { echo "no free port" >&2; return 1; }
    case " $_busy " in *" $_p "*) continue ;; esac
    case ",$_list," in *":$_p,"*) continue ;; esac
    _list="${_list:+$_list,}tcp://127.0.0.1:$_p"; _i=$((_i + 1))
  done
  echo "$_list"
}

# Swarm tests: a scratch directory $tmp (kept with RUMOR_KEEP_TMP=1), the
# background processes in $pids (killed on exit, thawed first in case they
# were stopped) and a watchdog's pid in $wd.
swarm_setup() {
  tmp=$(mktemp -d)
  pids= wd=
  trap swarm_cleanup EXIT
  trap 'exit 130' INT TERM
}
# Tests of rumor-peer processes on loopback: Fashion-MNIST, free
# ports, $RUMOR_PEER, and swarm_setup's scratch directory and cleanup.
peer_test_setup() {
  need_fashion
  [ -r /proc/net/tcp ] || skip "no /proc/net/tcp to find free ports in"
  RUMOR_PEER="$RUMOR_BUILDDIR/rumor-peer"
  swarm_setup
}
# Tests of rumor-peer processes training a GPT on English text: $text (the
# GPL, from base-files), free ports, $RUMOR_PEER (exported, for
# examples/local-swarm.sh) and swarm_setup's scratch directory and cleanup.
text_peer_test_setup() {
  text=/usr/share/common-licenses/GPL-3
  [ -f "$text" ] || skip "no $text (base-files)"
  [ -r /proc/net/tcp ] || skip "no /proc/net/tcp to find free ports in"
  RUMOR_PEER="$RUMOR_BUILDDIR/rumor-peer"
  export RUMOR_PEER
  swarm_setup
}
# netns_remove PREFIX: deletes the network namespaces named PREFIX-*, killing
# what still runs in them first
netns_remove() {
  _nss=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$1-")
  for _ns in $_nss; do
    for _p in $(ip netns pids "$_ns" 2>/dev/null); do kill -KILL "$_p" 2>/dev/null; done
  done
  for _ns in $_nss; do ip netns del "$_ns" 2>/dev/null; done
}
# netns_test_setup PREFIX: a test of peers in network namespaces behind
# nftables NATs: skips without root, ip, nft, Fashion-MNIST or working
# namespaces; sets $peer, $P (PREFIX and this shell's pid: the namespaces'
# prefix), $tmp and $pids, and on exit kills $pids, removes the namespaces
# and $tmp (kept with RUMOR_KEEP_TMP).
netns_test_setup() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, nft)"
  command -v ip >/dev/null || skip "ip (iproute2) not found"
  command -v nft >/dev/null || skip "nft (nftables) not found"
  need_fashion
  ip netns list >/dev/null 2>&1 || skip "ip netns does not work here"
  peer="$RUMOR_BUILDDIR/rumor-peer"
  P=$1$$
  tmp=$(mktemp -d)
  pids=
  trap netns_test_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
netns_test_cleanup() {
  for _p in $pids; do kill -KILL "$_p" 2>/dev/null; done
  netns_remove "$P"
  if [ -n "${RUMOR_KEEP_TMP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
swarm_cleanup() {
  for _p in $pids; do kill -CONT "$_p" 2>/dev/null; kill -KILL "$_p" 2>/dev/null; done
  [ -n "$wd" ] && kill "$wd" 2>/dev/null
  if [ -n "${RUMOR_KEEP_TMP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}

# fashion_swarm NAME [OPTIONS]: three peers train the MLP on 6000
# Fashion-MNIST examples for 3 epochs (batch 32, lr 0.05) on loopback with
# OPTIONS; logs in $tmp/NAME-R.log, metrics in $tmp/NAME-R.jsonl; fails the
# test if a peer fails. Peer 0's log ends with the swarm average's accuracy.
# FASHION_PEERS (3) and FASHION_DATA ("--train-limit 6000 --epochs 3") change
# the swarm's size and the data; FASHION_TRACE=1 writes $tmp/NAME-R.trace.json.
fashion_swarm() {
  _name=$1; shift
  _n=${FASHION_PEERS:-3}
  _eps=$(free_endpoints "$_n")
  pids=
  _r=0
  while [ $_r -lt "$_n" ]; do
    _trace=; [ "${FASHION_TRACE:-0}" = 1 ] && _trace="--trace $tmp/$_name-$_r.trace.json"
    # shellcheck disable=SC2086
    timeout 300 "$RUMOR_PEER" --insecure --rank $_r --peers "$_eps" --data "$FASHION" \
      ${FASHION_DATA:---train-limit 6000 --epochs 3} --batch 32 --lr 0.05 --progress 0 \
      --metrics "$tmp/$_name-$_r.jsonl" $_trace "$@" >"$tmp/$_name-$_r.log" 2>&1 &
    pids="$pids $!"
    _r=$((_r + 1))
  done
  for _p in $pids; do
    wait "$_p" || fail "a peer of the $_name run failed: $(tail -n 2 "$tmp/$_name-0.log")"
  done
  pids=
}
# swarm_accuracy NAME: peer 0's swarm-average test accuracy of that run, in %
swarm_accuracy() { sed -n 's/^peer 0: swarm average test accuracy \(.*\)%/\1/p' "$tmp/$1-0.log"; }

# rumor-peer metrics files (JSON lines):
# metrics_field FILE EVENT KEY: KEY's number in the last EVENT of FILE
metrics_field() { sed -n "s/.*\"event\":\"$2\".*\"$3\":\([-0-9.e+]*\).*/\1/p" "$1" | tail -1; }
# metrics_round FILE: the latest round in FILE
metrics_round() { tail -c 4000 "$1" 2>/dev/null | grep -o '"event":"round","round":[0-9]*' | tail -1 | sed 's/.*://'; }
# wait_round FILE ROUND: until the peer's metrics reach ROUND (60 s at most)
wait_round() {
  _i=0
  while _lr=$(metrics_round "$1"); [ -z "$_lr" ] || [ "$_lr" -lt "$2" ]; do
    sleep 0.05; _i=$((_i + 1))
    [ $_i -lt 1200 ] || { fail "$1 never reached round $2"; return 1; }
  done
}
