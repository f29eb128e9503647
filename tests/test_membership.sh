#!/bin/sh
# Membership without a coordinator: 8 rumor-peer processes on a ring over
# loopback; peers 2 and 5 are killed with SIGKILL early in the run, which
# cuts a ring of 8 into two arcs ({3,4} and {6,7,0,1}).
#   - with --membership swim the survivors' views drop to 6 members within
#     a few seconds (SWIM probes, suspicion, dissemination), the ring is
#     re-derived over the 6 living peers, and they keep training as one
#     swarm;
#   - with static membership (the same run otherwise) the arcs train apart.
# Asserted: every survivor of the SWIM run comes to a view of exactly the 6
# living peers (over real sockets: probes, indirect probes, suspicion,
# dissemination), peer 0 within 10 s of the kill, and all survivors finish;
# the survivors stay one swarm: the largest distance between their final
# models (safetensors checkpoints read with Python, relative to the
# parameters' norm) is under a tenth of the static run's, where the ring
# broke into two arcs that trained apart (0.0003-0.0014 against 0.30 in
# runs on a 2-core machine). Rounds are slowed (--throttle 12) so that the
# run outlasts the detection by several seconds.
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
need_fashion
command -v python3 >/dev/null || skip "python3 not found"

PEER="$RUMOR_BUILDDIR/rumor-peer"
swarm_setup


run() { # NAME MEMBERSHIP
  ports=$(free_endpoints 8)
  mkdir -p "$tmp/$1"
  pids=
  for r in 0 1 2 3 4 5 6 7; do
    "$PEER" --insecure --rank $r --peers "$ports" --epochs 6 --data "$FASHION" --seed 3 \
      --membership "$2" --throttle 12 --round-timeout 5 --log-level info --progress 0.05 --no-average \
      --checkpoint-dir "$tmp/$1/ckpt-$r" --metrics "$tmp/$1/m-$r.jsonl" >"$tmp/$1/p-$r.log" 2>&1 &
    pids="$pids $!"
    eval "pid_$r=\$!"
  done
  wait_round "$tmp/$1/m-0.jsonl" 40
  kill -KILL $pid_2 $pid_5 || fail "$1: peers 2 and 5 gone before the kill"
  eval "kill_wall_$1=$(date '+%H %M %S.%N' | awk '{printf "%.3f", $1 * 3600 + $2 * 60 + $3}')"
  echo "membership: $1: killed peers 2 and 5 at round $(metrics_round "$tmp/$1/m-0.jsonl")"
  for r in 0 1 3 4 6 7; do eval "wait \$pid_$r"; expect_rc 0 $? "$1 peer $r" "$tmp/$1/p-$r.log"; done
  pids=
}

# the largest distance between two survivors' final parameters, relative
# to the parameters' norm
spread() {
  python3 - "$tmp/$1" <<'PY'
import glob, json, math, struct, sys
def params(d):
    p = sorted(glob.glob(d + "/*.safetensors"))[-1]
    raw = open(p, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n]); hdr.pop("__metadata__")
    out = []
    for name in sorted(hdr):
        if name.startswith("optim"):
            continue
        a, b = hdr[name]["data_offsets"]
        out.extend(struct.unpack("<%df" % ((b - a) // 4), raw[8 + n + a:8 + n + b]))
    return out
ps = [params(sys.argv[1] + "/ckpt-%d" % r) for r in (0, 1, 3, 4, 6, 7)]
norm = math.sqrt(sum(v * v for v in ps[0]))
worst = 0.0
for i in range(len(ps)):
    for j in range(i + 1, len(ps)):
        worst = max(worst, math.sqrt(sum((x - y) ** 2 for x, y in zip(ps[i], ps[j]))))
print("%.6g" % (worst / norm))
PY
}

run swim swim
run static static

# SWIM: every survivor comes to a view of the 6 living peers (at the very
# end views shrink again as peers finish and leave), within 10 s of the kill
# (views grow 1, 2, ... 8 at start: the 6 that counts comes after the 8)
after8() { awk '/membership: 8 peers alive/ {s = 1; next} s && /membership: 6 peers alive/' "$1"; }
for r in 0 1 3 4 6 7; do
  after8 "$tmp/swim/p-$r.log" | grep -q . ||
    fail "swim: peer $r never had a view of the 6 survivors: $(grep 'peers alive' "$tmp/swim/p-$r.log" | tail -3)"
done
# the log's wall clock: seconds of day when peer 0's view became the 6
t6=$(after8 "$tmp/swim/p-0.log" | head -1 | sed -n 's/.* \([0-9][0-9]\):\([0-9][0-9]\):\([0-9.]*\) info.*/\1 \2 \3/p' |
  awk '{printf "%.3f", $1 * 3600 + $2 * 60 + $3}')
det=$(awk -v a="${t6:-0}" -v b="$kill_wall_swim" 'BEGIN{d = a - b; if (d < -43200) d += 86400; printf "%.2f", d}')
echo "membership: swim: peer 0 saw the 6 survivors $det s after the kill"
expect_num_lt "$det" 10 "seconds from the kill to a view of 6"

s_swim=$(spread swim); s_static=$(spread static)
echo "membership: largest distance between survivors' final models / norm: swim $s_swim, static $s_static"
expect_num_lt "$s_swim" "$(awk -v s="$s_static" 'BEGIN{print s / 10}')" "swim survivors' spread vs a tenth of the static run's"
finish
