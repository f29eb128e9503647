#!/bin/sh
# A swarm with a lying peer: robust mixing (--robust clip) against none.
# Five peers on a ring train the Fashion-MNIST MLP; rank 4 is
# tests/rumor-attacker, which trains honestly but sends its neighbours
# (ranks 3 and 0) lies: its parameters sign-flipped, or Gaussian noise of
# their norm. Checked, on the honest peers' local test accuracy:
#   - without an attacker, --robust clip costs little: within 2 points of
#     --robust none;
#   - sign-flipped with --robust none, the honest peers collapse: more than
#     15 points below the attack-free run (the check that the attack bites);
#   - with --robust clip they stay within 2 points of the attack-free run,
#     and the liar's two neighbours quarantine it (said, naming it), nobody
#     else anyone;
#   - the same for noise of the same norm, and for parameters 100 times
#     their size (which the outlier check leaves out before robust mixing
#     judges them);
#   - against a liar just inside the honest spread (alie:4: its parameters
#     moved back against its own progress, 4 times its last step), within 2
#     points too: clipped to about its fellow neighbours' distance, not
#     quarantined; and with --robust-val 4 (its parameters and its fellows'
#     scored on validation data every 4 rounds) both its neighbours
#     quarantine it, the honest peers within 2 points, and rank 0's
#     Prometheus page shows the liar's share of far probes past 0.6 and its
#     honest neighbour's below 0.3.
# --robust trimmed:1 (each element's largest and smallest neighbour value
# left out) on the complete graph of five (in-degree 4): within 2 points of
# the attack-free run with none, with a sign-flipping liar and with one
# just inside the honest spread (alie:4), where none loses; refused on the
# ring (in-degree 2 < 3).
# --robust is refused with --compress and with --mode async (usage, 2), and
# a bad --robust-val, or one without --robust.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
peer_test_setup
attacker="$RUMOR_BUILDDIR/tests/rumor-attacker"
[ -x "$attacker" ] || fail "tests/rumor-attacker is not built"

common="--data $FASHION --model mlp:784-32-10 --train-limit 6000 --epochs 2 --batch 32 --lr 0.05
        --progress 0 --no-average"

# run NAME ATTACK ROBUST: ranks 0-3 rumor-peer; rank 4 the attacker
# (ATTACK: none for an honest rank 4); on $TOPO (default: ring), with the
# options $EXTRA
run() {
  eps=$(free_endpoints 5)
  pids=
  for r in 0 1 2 3 4; do
    bin=$RUMOR_PEER
    [ $r = 4 ] && [ "$2" != none ] && bin=$attacker
    prom=
    [ $r = 0 ] && [ -n "${PROM:-}" ] && prom="--metrics-listen 127.0.0.1:$PROM"
    RUMOR_ATTACK=$2 timeout 300 "$bin" --insecure --rank $r --peers "$eps" $common \
      --topology "${TOPO:-ring}" --robust "$3" ${EXTRA:-} --metrics "$tmp/$1-$r.jsonl" $prom >"$tmp/$1-$r.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || fail "$1: a peer failed: $(tail -n 2 "$tmp/$1-0.log")"; done
  pids=
}
# honest NAME: the honest ranks' mean local test accuracy
honest() {
  for r in 0 1 2 3; do
    sed -n 's/^peer [0-9]*: local test accuracy \([0-9.]*\)%.*/\1/p' "$tmp/$1-$r.log"
  done | awk '{ s += $1; n++ } END { if (n == 4) printf "%.2f", s / n; else print "none" }'
}

# clipped RUN: rank 0's ranges clipped of those judged (its done event)
clipped() {
  echo "$(metrics_field "$tmp/$1-0.jsonl" done robust_clipped) of $(metrics_field "$tmp/$1-0.jsonl" done robust_ranges)"
}

run clean none clip
run plain none none
clean=$(honest clean) plain=$(honest plain)
echo "robust: no attacker: honest peers $plain% with --robust none, $clean% with clip (rank 0 clipped $(clipped clean) ranges)"
expect_num_ge "$clean" "$(echo "$plain" | awk '{ print $1 - 2 }')" "the attack-free run with clip"

run sign-none sign none
collapsed=$(honest sign-none)
echo "robust: sign-flipped liar, --robust none: honest peers $collapsed%"
expect_num_le "$collapsed" "$(echo "$clean" | awk '{ print $1 - 15 }')" \
  "the honest peers' accuracy with a sign-flipping liar and no defence (the attack must bite)"

# scrape PORT FILE: rank 0's Prometheus page, every 0.1 s for 60 s at most,
# until it shows rank 4 in quarantine; that page into FILE
scrape() {
  python3 - "$1" "$2" <<'EOF' &
import sys, time, urllib.request
url, out = "http://127.0.0.1:%s/metrics" % sys.argv[1], sys.argv[2]
end = time.time() + 60
while time.time() < end:
    try:
        page = urllib.request.urlopen(url, timeout=1).read().decode()
        if 'rumor_neighbor_quarantined{rank="0",neighbor="4"} 1' in page:
            open(out, "w").write(page)
            break
    except Exception:
        pass
    time.sleep(0.1)
EOF
  scraper=$!
}
# liar_on_page FILE METRIC: on rank 0's page (FILE), the liar rank 4's
# METRIC (a share, 0 to 1) past the threshold 0.6, its honest neighbour
# rank 1's below 0.3
liar_on_page() {
  g4=$(sed -n "s/^$2{rank=\"0\",neighbor=\"4\"} //p" "$1")
  g1=$(sed -n "s/^$2{rank=\"0\",neighbor=\"1\"} //p" "$1")
  echo "robust: rank 0's Prometheus page: $2 of rank 4 ${g4:-none}, of rank 1 ${g1:-none}"
  expect_num_ge "${g4:-0}" 0.6 "rank 4's $2 on rank 0's page"
  expect_num_le "${g1:-1}" 0.3 "rank 1's $2 on rank 0's page"
}

for attack in sign noise scale:100 alie:4; do
  PROM=
  if [ "$attack" = sign ] && command -v python3 >/dev/null; then
    PROM=$(free_endpoints 1 | sed 's/.*://')
    scrape "$PROM" "$tmp/prom.txt"
  fi
  PROM=$PROM run "$attack-clip" "$attack" clip
  if [ -n "$PROM" ]; then
    wait "$scraper"
    # Prometheus: rank 0 names the liar, its score past the threshold, and
    # its honest neighbour rank 1 well below it
    grep -q 'rumor_neighbor_quarantined{rank="0",neighbor="4"} 1' "$tmp/prom.txt" 2>/dev/null ||
      fail "rank 0's Prometheus page never showed rank 4 in quarantine"
    liar_on_page "$tmp/prom.txt" rumor_neighbor_robust_score
    grep -q '^rumor_quarantines_total{rank="0"} [1-9]' "$tmp/prom.txt" ||
      fail "rank 0's page does not count the quarantine"
  fi
  got=$(honest $attack-clip)
  echo "robust: $attack liar, --robust clip: honest peers $got% (attack-free $clean%; rank 0 clipped $(clipped $attack-clip) ranges)"
  expect_num_ge "$got" "$(echo "$clean" | awk '{ print $1 - 2 }')" \
    "the honest peers' accuracy with a $attack liar and --robust clip"
  # (a liar 100 times away is left out as an outlier before it is judged;
  # one inside the spread is bounded, not quarantined)
  [ "$attack" = scale:100 ] || [ "$attack" = alie:4 ] && continue
  for r in 3 0; do
    grep -q "peer 4 (.*): .* of its recent ranges were far beyond the bound .*quarantined for 30 s" \
      "$tmp/$attack-clip-$r.log" ||
      fail "$attack: rank $r did not quarantine the liar: $(grep -m2 'warn' "$tmp/$attack-clip-$r.log")"
  done
  for r in 1 2; do
    grep -q "quarantined" "$tmp/$attack-clip-$r.log" &&
      fail "$attack: rank $r, no neighbour of the liar, quarantined someone"
  done
done

# the trimmed mean, on the complete graph of five
TOPO=complete run trim-plain none none
TOPO=complete run trim-clean none trimmed:1
tplain=$(honest trim-plain) tclean=$(honest trim-clean)
echo "robust: complete graph, no attacker: honest peers $tplain% with --robust none, $tclean% with trimmed:1"
expect_num_ge "$tclean" "$(echo "$tplain" | awk '{ print $1 - 2 }')" "the attack-free run with trimmed:1"
TOPO=complete run trim-sign-none sign none
got=$(honest trim-sign-none)
echo "robust: complete graph, sign-flipped liar, --robust none: honest peers $got%"
expect_num_le "$got" "$(echo "$tplain" | awk '{ print $1 - 15 }')" \
  "the honest peers' accuracy on the complete graph with a sign-flipping liar and no defence"
for attack in sign alie:4; do
  TOPO=complete run "trim-$attack" "$attack" trimmed:1
  got=$(honest "trim-$attack")
  echo "robust: complete graph, $attack liar, --robust trimmed:1: honest peers $got% (attack-free $tplain% with none)"
  expect_num_ge "$got" "$(echo "$tplain" | awk '{ print $1 - 2 }')" \
    "the honest peers' accuracy with a $attack liar and --robust trimmed:1"
done
eps=$(free_endpoints 3)
"$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --topology ring \
  --robust trimmed:1 >"$tmp/bad.log" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "trimmed:1.*needs 3 in-neighbours: this peer has 2" "$tmp/bad.log" ||
  fail "--robust trimmed:1 on a ring: exit $rc, $(grep -m1 . "$tmp/bad.log")"
# The validation probe (--robust-val 4: every 4 rounds each neighbour's
# parameters and this peer's own are scored on 4 batches of the test set)
# against the liar inside the spread, which distances only bound: its two
# neighbours quarantine it for what its parameters score, and the honest
# peers end within 2 points of the attack-free run.
PROM=
if command -v python3 >/dev/null; then
  PROM=$(free_endpoints 1 | sed 's/.*://')
  scrape "$PROM" "$tmp/prom-val.txt"
fi
PROM=$PROM EXTRA="--robust-val 4" run alie-val alie:4 clip
if [ -n "$PROM" ]; then
  wait "$scraper"
  # rank 0's page: the liar's share of far probes past the threshold, its
  # honest neighbour rank 1's below it
  liar_on_page "$tmp/prom-val.txt" rumor_neighbor_robust_val_score
fi
got=$(honest alie-val)
echo "robust: alie:4 liar, --robust clip --robust-val 4: honest peers $got% (attack-free $clean%)"
expect_num_ge "$got" "$(echo "$clean" | awk '{ print $1 - 2 }')" \
  "the honest peers' accuracy with an alie:4 liar and --robust-val"
for r in 3 0; do
  grep -q "peer 4 (.*): .* of its recent probes scored far above its fellows' on validation data.*quarantined for 30 s" \
    "$tmp/alie-val-$r.log" ||
    fail "alie:4 with --robust-val: rank $r did not quarantine the liar: $(grep -m2 'warn' "$tmp/alie-val-$r.log")"
done

# where it is not defined: said, usage
eps=$(free_endpoints 2)
for bad in "--compress int8" "--mode async" ; do
  "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --robust clip $bad \
    >"$tmp/bad.log" 2>&1
  rc=$?
  [ $rc = 2 ] || fail "--robust clip $bad: exit $rc, expected 2"
  grep -q "rumor-peer: --robust" "$tmp/bad.log" || fail "--robust clip $bad: $(head -n 1 "$tmp/bad.log")"
done
"$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --robust clip:tau=-1 \
  >"$tmp/bad.log" 2>&1
[ $? = 2 ] && grep -q "tau is auto or a norm > 0" "$tmp/bad.log" ||
  fail "--robust clip:tau=-1: $(head -n 1 "$tmp/bad.log")"
for bad in 0 x 4:0 4: -1; do
  "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --robust clip \
    --robust-val "$bad" >"$tmp/bad.log" 2>&1
  [ $? = 2 ] && grep -q "rumor-peer: --robust-val '$bad'" "$tmp/bad.log" ||
    fail "--robust-val $bad: $(head -n 1 "$tmp/bad.log")"
done
"$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --robust-val 4 \
  >"$tmp/bad.log" 2>&1
[ $? = 2 ] && grep -q "it needs --robust clip or trimmed" "$tmp/bad.log" ||
  fail "--robust-val without --robust: $(head -n 1 "$tmp/bad.log")"
for bad in trimmed:0 trimmed:x trim; do
  "$RUMOR_PEER" --insecure --rank 0 --peers "$eps" --data "$FASHION" --robust $bad \
    >"$tmp/bad.log" 2>&1
  [ $? = 2 ] && grep -q "rumor-peer: --robust '$bad'" "$tmp/bad.log" ||
    fail "--robust $bad: $(head -n 1 "$tmp/bad.log")"
done
finish
