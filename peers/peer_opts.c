/* rumor-peer's options (peer_opts.h). */
#include "peer_opts.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "outer.h"
#include "peerlist.h"
#include "promserve.h"

static const char usage_head[] =
    "Usage: rumor-peer --rank R --peers EP0,EP1,... --keys KEY --allow LIST [OPTION]...\n"
    "  or:  rumor-peer --listen ADDR [--join HOST:PORT] --keys KEY --allow LIST [OPTION]...\n"
    "  or:  rumor-peer keygen [--force] PREFIX...\n"
    "Run one peer of a swarm that trains a model together with D-PSGD.\n"
    "\n"
    "A swarm of a fixed list: start one rumor-peer per machine (or per process)\n"
    "with the same --peers list, topology, model and seed, and each its own --rank.\n"
    "Peer R listens on the R-th endpoint and trains on shard R of the data.\n"
    "An open swarm: start each peer with --listen and the address of any live peer\n"
    "(--join), no rank; the swarm is whoever is alive, each peer draws its own\n"
    "seeded stream of batches over the whole training set, and a newcomer starts\n"
    "from the parameters its neighbours hold. Each round a peer sends its parameters\n"
    "to its neighbours in the topology while it computes its gradient, averages what\n"
    "arrives with the topology's weights and steps its optimizer. A neighbour that\n"
    "misses the round's deadline is left out of that round (its weight goes to the\n"
    "peer's own) and waited for again in the next while it is alive; one silent for\n"
    "the heartbeat timeout (2 s), leaving, or left behind is not waited for.\n"
    "\n"
    "Swarm:\n"
    "  --rank R               this peer's index in the peer list (required with\n"
    "                         --peers)\n"
    "  --peers LIST           comma-separated ZeroMQ endpoints of every peer, in rank\n"
    "                         order, e.g. tcp://10.0.0.1:7000,tcp://10.0.0.2:7000;\n"
    "                         with --membership swim an entry may be - (address not\n"
    "                         known: learned from the swarm) and an address may be\n"
    "                         stale: one live peer listed is enough to join\n"
    "  --peers-file FILE      the same list, one endpoint a line (# comments); a second\n"
    "                         column may give the peer's public key (Z85 or a .pub file)\n"
    "  --listen ADDR          address to bind, HOST:PORT or tcp://HOST:PORT (a name\n"
    "                         is looked up; IPv6 in brackets, tcp://[::1]:7000)\n"
    "                         (default: this peer's endpoint in the list; required\n"
    "                         in an open swarm; tcp://*:PORT listens on every\n"
    "                         interface, IPv4 and IPv6, tcp://0.0.0.0:PORT on every\n"
    "                         IPv4 one); tried before the data loads\n"
    "  --swarm NAME           swarm name; peers of other swarms are ignored\n"
    "                         (default: rumor)\n"
    "  --topology SPEC        ring, torus:RxC, exp, onepeer-exp, hypercube:D, complete,\n"
    "                         rreg:N:D:seed=S, file:EDGES, ... (rumor-topo's specs; a\n"
    "                         spec without its size gets the peer count: ring ->\n"
    "                         ring:N) (default: ring)\n"
    "  --membership MODE      static: the graph is fixed and a dead peer is only left\n"
    "                         out round by round; swim: peers track who is alive with\n"
    "                         SWIM (every listed address is a seed; members' own\n"
    "                         addresses spread with the membership, so a peer that\n"
    "                         comes back elsewhere is found again) and the topology\n"
    "                         family is laid over the living, sorted by id, with\n"
    "                         Metropolis-Hastings weights (default: static with\n"
    "                         --peers; an open swarm is always swim); with swim,\n"
    "                         --topology chord places edges by id distance (Chord's\n"
    "                         fingers), so a join or death moves a few edges, not\n"
    "                         most: for large swarms with churn\n"
    "  --weights SCHEME       mh, maxdeg, uniform, bestconst, fmmc or file:W from\n"
    "                         'rumor-topo weights' (default: mh)\n"
    "  --mode MODE            dpsgd (gossip, synchronous rounds), async (gossip that\n"
    "                         never waits: AD-PSGD, for swarms with stragglers) or\n"
    "                         allreduce (ring all-reduce of gradients, the\n"
    "                         centralized baseline) (default: dpsgd)\n"
    "  --round-timeout SECS   the longest a round waits for neighbours (default: 10);\n"
    "                         the deadline adapts to the round times seen: 4x their\n"
    "                         median, at least --min-round-timeout\n"
    "  --min-round-timeout SECS\n"
    "                         the shortest deadline, at most --round-timeout\n"
    "                         (default: 0.5, or --round-timeout if shorter; set it\n"
    "                         equal to --round-timeout for a fixed deadline)\n"
    "  --staleness N          async: mix a neighbour's parameters only if at most N\n"
    "                         rounds old (default: 8)\n"
    "  --catch-up-rounds N    a peer more than N rounds behind its neighbours whose\n"
    "                         parameters are stale (it ran N rounds or fewer since it\n"
    "                         started or resumed, or was frozen) fetches their state;\n"
    "                         otherwise it skips ahead keeping its parameters, which\n"
    "                         gossip merges with the others' (default: 50)\n"
    "  --balance MODE         none, or batch: a peer that waits for its neighbours takes\n"
    "                         more batches of --batch examples a round (their\n"
    "                         gradients averaged), as many as fit in its wait, so fast\n"
    "                         peers work while the slowest computes (--mode dpsgd;\n"
    "                         every peer's loss still counts the same: see\n"
    "                         docs/balance.md) (default: none)\n"
    "  --balance-max N        batch: at most N batches a round, 1 to 64 (default: 4)\n"
    "  --throttle F           testing: run F times slower than this machine can\n"
    "                         (sleeps after each gradient), to play a straggler\n"
    "  --link-mbit R          this peer's upload rate in Mbit/s, where known: the\n"
    "                         progress line, metrics and Prometheus show the link's\n"
    "                         utilization (bytes sent a second / R) beside the\n"
    "                         compute utilization (the share of the time spent\n"
    "                         computing, not waiting for neighbours)\n"
    "  --start-timeout SECS   how long to wait for neighbours at start (default: 60);\n"
    "                         SIGTERM or SIGINT before training begins leaves at\n"
    "                         once, exit status 0\n"
    "  --chunk-mb X           the size of the parameter ranges this peer sends, and of\n"
    "                         the cells it mixes in (default: 1, or an eighth of a\n"
    "                         model under 8 MiB, at least 1/16; at most 64); peers\n"
    "                         may differ\n"
    "  --send-ahead yes|no    dpsgd, one local step: step the mix cell by cell as it\n"
    "                         arrives and send each stepped cell to the next round's\n"
    "                         neighbours at once, so that a link carries round k + 1\n"
    "                         while round k's last cells still come (default: yes;\n"
    "                         see docs/protocol.md, section 6)\n"
    "  --max-message-mb X     the largest parameter range accepted from a neighbour\n"
    "                         (default: 64, at least --chunk-mb); larger ones are\n"
    "                         dropped as chunk_too_large (above twice this, ZeroMQ\n"
    "                         closes the connection instead)\n"
    "  --rounds N             stop after N rounds (default: --epochs passes over the\n"
    "                         shard); the learning-rate schedule spans them\n"
    "  --local-steps H        local SGD on the graph: a round is H optimizer steps on\n"
    "                         this peer's own data, the last of them overlapped with\n"
    "                         the gossip as always: H times fewer bytes a step\n"
    "                         (--mode dpsgd or async), 1 to 10000 (default: 1)\n"
    "  --outer SPEC           with --local-steps H (H >= 2, or any H with\n"
    "                         --outer-rounds above 1): all H steps first, then\n"
    "                         the gossip, and an outer optimizer steps the round's\n"
    "                         start by the change the mix proposes (DiLoCo on a\n"
    "                         graph):\n"
    "                         nesterov[:lr=X,momentum=Y] (lr in (0, 10], default 0.7;\n"
    "                         momentum in [0, 1), default 0.9) or sgd[:lr=X] (lr 1:\n"
    "                         the mix itself), whose state is not checkpointed (a\n"
    "                         resumed peer starts it anew); or optim, with\n"
    "                         --local-steps 1: the peer's own --optimizer steps on\n"
    "                         the mean gradient the mix gives, so that with\n"
    "                         --outer-rounds period the swarm trains as one process\n"
    "                         with N times the batch (default: none)\n"
    "  --outer-rounds R       with --outer: an outer step mixes over R rounds of\n"
    "                         gossip, the H local steps before the first; period:\n"
    "                         the topology's period, over which onepeer-exp (a power\n"
    "                         of 2 peers) and base:K average exactly, as an\n"
    "                         all-reduce would, in log2(n) rounds of one neighbour\n"
    "                         each (default: 1)\n"
    "  --fragments F          with --outer sgd or nesterov: streaming outer steps\n"
    "                         (Streaming DiLoCo): the parameters are F equal runs,\n"
    "                         a round gossips one of them (round k fragment k mod F)\n"
    "                         after H / F of the --local-steps H, so each fragment\n"
    "                         gets its outer step every H steps and a round sends\n"
    "                         1/F of the model: F times less in flight at once.\n"
    "                         H must be a multiple of F; closed swarms, f32 gossip,\n"
    "                         one stage (default: 1, all at once)\n"
    "  --overlap S[:alpha=A]  with --outer: S of a round's H / F steps run while its\n"
    "                         fragment is in flight, then the steps taken meanwhile\n"
    "                         are merged with the new anchor: x = A x + (1 - A)\n"
    "                         anchor (A default 0.5; S = 0, the default: x = anchor,\n"
    "                         the link idle while the round's steps compute)\n"
    "  --compress CODEC       compressed gossip, CHOCO-SGD with error feedback: none,\n"
    "                         int8, int4, int2, topk:F[:bits=B[:chunk=C]] or randk:F\n"
    "                         (F in (0, 1], the share of elements sent; with bits,\n"
    "                         the top F of each chunk of C elements, default 4096,\n"
    "                         in B = 2, 4 or 8 bits: topk:0.0156:bits=2 sends 141x\n"
    "                         fewer bytes); every peer of a swarm must use the same\n"
    "                         codec (see docs/compression.md); with --mode\n"
    "                         allreduce, int8 or int4 gradients (default: none)\n"
    "  --consensus-step G     with --compress: CHOCO's consensus step gamma in (0, 1]\n"
    "                         (default: the codec's: 1 int8, 0.8 int4, 0.4 int2, 2F\n"
    "                         topk, F randk)\n"
    "  --keyframe-every R     with --compress: every R-th round sends full f32\n"
    "                         parameters, which resynchronizes the peers' copies\n"
    "                         after a lost round (default: the codec's: 16 int8,\n"
    "                         32 int4, 64 int2, the ratio of f32 to topk or randk,\n"
    "                         at least 16), 1 to 100000\n"
    "  --eval-every N         evaluate the local model every N epochs (default: 1)\n"
    "  --no-average           skip the swarm-average evaluation at the end\n"
    "  --save-average DIR     write the swarm average (parameters only) there as\n"
    "                         <swarm>-average-r<rank>-<round>.safetensors, for\n"
    "                         rumor-train sample, eval or export; made and checked\n"
    "                         at start. Should writing it fail at the end, it goes\n"
    "                         to --checkpoint-dir or a temporary directory, named on\n"
    "                         stderr, and the exit status is 1\n"
    "  --allow-alone          exit 0 even if no neighbour's parameters ever arrived\n"
    "                         (default: such a run is an error, exit status 1)\n"
    "\n"
    "Open membership (no --rank, no --peers):\n"
    "  --join LIST            addresses of live peers to join through, comma-separated\n"
    "                         HOST:PORT or tcp://HOST:PORT (a founding peer gives\n"
    "                         none); on a secure swarm NAME@HOST:PORT names the key\n"
    "                         expected there (an allow-list name such as peer-0, a\n"
    "                         Z85 key or a .pub file), else every allowed key is\n"
    "                         tried there. A joiner that reaches nobody within\n"
    "                         --start-timeout exits 1 and says so\n"
    "  --advertise ADDR       the address the others reach this peer at, spread with\n"
    "                         the membership (default: --listen's; required when\n"
    "                         --listen binds every interface)\n"
    "  --min-peers N          wait (at most --start-timeout) until N peers, this one\n"
    "                         included, are alive before the first round, 1 to 4096\n"
    "                         (default: 1, or 2 with --join)\n"
    "  --max-peers N          the most peers this one meets in its life, a slot each\n"
    "                         (plaintext peers get a new id every life), 2 to 65536\n"
    "                         (default: 256)\n"
    "\n"
    "Relays (for peers that cannot be dialled: behind a NAT or a firewall):\n"
    "  --relay PORT|HOST:PORT relay for such peers: registrations from the allow-list's\n"
    "                         keys come to this control address (PORT: on --listen's\n"
    "                         address), and each registered peer is reached at a port\n"
    "                         opened for it on the same interface, under --advertise's\n"
    "                         host. The relay splices TCP streams and sees only\n"
    "                         ciphertext (rumor-peer relay runs one without training)\n"
    "  --relay-max-peers N    peers relayed at once, 1 to 4096 (default: 32)\n"
    "  --relay-mbit R         the bandwidth given to each relayed peer, both ways,\n"
    "                         in Mbit/s (default: no limit)\n"
    "  --relay-via LIST       open membership: this peer cannot be dialled; it registers\n"
    "                         with the first relay of LIST that answers (NAME@HOST:PORT,\n"
    "                         the relay's control address and the allow-list name or\n"
    "                         key it holds, comma-separated) and announces the address\n"
    "                         the relay gives it instead of --advertise; neighbours'\n"
    "                         connections come through the relay, their CurveZMQ\n"
    "                         handshake still with this peer (see docs/protocol.md).\n"
    "                         Two peers behind one relay punch a direct path through\n"
    "                         their NATs (TCP simultaneous open) and keep the relay\n"
    "                         as the fallback\n"
    "  --no-hole-punch        with --relay-via: no direct paths, all through the relay\n"
    "\n"
    "Security (CurveZMQ; on unless --insecure):\n"
    "  --keys FILE            this peer's secret key file (from rumor-peer keygen;\n"
    "                         must not be readable by group or others)\n"
    "  --allow PATH           the swarm's allow-list: a file of public keys (one Z85\n"
    "                         key a line, optionally followed by a name), a directory\n"
    "                         of .pub files or one .pub file; only these keys may\n"
    "                         connect\n"
    "  --peer-keys LIST       comma-separated public keys (Z85 or .pub files) of the\n"
    "                         peers in rank order; by default peer R's key is the\n"
    "                         peers file's second column or the allow-list's entry\n"
    "                         named peer-R (the file peer-R.pub of a directory)\n"
    "  --connections N        connections to each neighbour (default: 1); with\n"
    "                         --io-threads N as well, CURVE encryption of the\n"
    "                         connections runs on N cores instead of one\n"
    "  --io-threads N         ZeroMQ I/O threads (default: 1): CURVE encrypts on the\n"
    "                         I/O thread of each connection, so 2 and 2 use two cores\n"
    "  --insecure             plaintext: anyone who can reach the port can join the\n"
    "                         swarm and read or poison its parameters\n"
    "  --robust MODE          against a neighbour that sends wrong parameters: none\n"
    "                         (default: its weight alone bounds it), clip[:tau=X]\n"
    "                         (each neighbour's difference from this peer's own\n"
    "                         parameters is clipped to tau, an L2 norm over the\n"
    "                         model, before it is weighted; default: chosen from the\n"
    "                         recent differences) or trimmed[:K] (element by\n"
    "                         element, the K largest and K smallest of the\n"
    "                         neighbours' values are left out, the rest averaged\n"
    "                         with this peer's own; needs 2K+1 in-neighbours,\n"
    "                         default K 1); a neighbour far beyond the others\n"
    "                         again and again is quarantined for 30 s.\n"
    "                         Synchronous rounds without --compress only\n"
    "  --robust-val N[:B]     with --robust: every N rounds, score each neighbour's\n"
    "                         parameters and this peer's own on B validation batches\n"
    "                         (default 4); one whose loss sits far above the\n"
    "                         others' in most of its recent probes is quarantined\n"
    "                         (a liar inside the honest spread)\n"
    "\n"
    "Monitoring:\n"
    "  --metrics-listen ADDR:PORT\n"
    "                         serve Prometheus metrics at http://ADDR:PORT/metrics\n"
    "                         (phase, round, loss, examples/s, bytes, waiting,\n"
    "                         consensus distance, neighbours, members, rejected\n"
    "                         messages by reason, checkpoint age) from the start,\n"
    "                         before the data loads, e.g. 127.0.0.1:9400\n"
    "                         (0.0.0.0:PORT for every interface); off by default\n"
    "\n"
    "Preemption and checkpoints:\n"
    "  --checkpoint-dir DIR   write checkpoints (safetensors) there at the end of every\n"
    "                         epoch, every --checkpoint-every rounds and when leaving;\n"
    "                         at start, resume from the newest one that loads (one\n"
    "                         at or past the run's end: nothing to train, exit 1).\n"
    "                         Made and checked at start; a checkpoint that fails\n"
    "                         later is an error the last line counts (exit 1)\n"
    "  --checkpoint-every N   also every N rounds (default: 0, epochs only)\n"
    "  --keep-checkpoints K   keep the newest K (default: 3)\n"
    "  --leave-timeout SECS   on SIGTERM or SIGINT: end the round at once, checkpoint,\n"
    "                         tell the neighbours, exit 0; forced exit (status 1)\n"
    "                         after this many seconds (default: 10)\n"
    "\n";

static const char usage_tail[] =
    "\n"
    "Progress lines show the round, loss, examples/s, the distance of this peer's\n"
    "parameters to its neighbourhood's mix (|mix - x|, shrinking as peers agree),\n"
    "megabytes sent and received, and the share of time spent waiting for\n"
    "neighbours.\n"
    "\n"
    "rumor-peer keygen PREFIX writes a new CurveZMQ keypair: PREFIX.key (secret,\n"
    "mode 0600) and PREFIX.pub (public: add it to every peer's allow-list).\n"
    "rumor-peer relay runs a relay and nothing else (rumor-peer relay --help).\n"
    "\n"
    "Every peer of a swarm must run the same model, --mode, --compress (and\n"
    "--keyframe-every), --local-steps and --outer: peers tell each other theirs, and a\n"
    "neighbour that differs is named and not mixed with; a peer left with none to\n"
    "mix with stops (exit status 1). A neighbour whose parameters lie more than 10x\n"
    "this peer's norm away (its training diverged) is named and left out of the\n"
    "round.\n"
    "\n"
    "Exit status: 0 on success, 1 on a runtime error, 2 on bad usage.\n"
    "\n"
    "Examples:\n"
    "  # four peers on one machine, a ring over loopback, keys in keys/\n"
    "  mkdir -p keys; for r in 0 1 2 3; do rumor-peer keygen keys/peer-$r; done\n"
    "  P=; for r in 0 1 2 3; do P=$P${P:+,}tcp://127.0.0.1:700$r; done\n"
    "  for r in 0 1 2 3; do\n"
    "    rumor-peer --rank $r --peers $P --keys keys/peer-$r.key --allow keys --epochs 3 &\n"
    "  done; wait\n"
    "  # the same with a config file holding the shared settings\n"
    "  rumor-peer -c swarm.ini --rank 2\n"
    "  # an open swarm: a founder, then any number of peers joining through it\n"
    "  rumor-peer --listen tcp://10.0.0.1:7000 --keys keys/a.key --allow keys --epochs 3\n"
    "  rumor-peer --listen tcp://10.0.0.2:7000 --join 10.0.0.1:7000 --keys keys/b.key \\\n"
    "      --allow keys --epochs 3\n";

static const rumor_opt_t option_table[] = {
    { "rank", 0, RUMOR_OPT_INT, offsetof(struct options, rank), 0, 1 << 20, NULL, 0 },
    { "peers", 0, RUMOR_OPT_STR, offsetof(struct options, peers), 0, 0, NULL, 0 },
    { "peers-file", 0, RUMOR_OPT_PATH, offsetof(struct options, peers_file), 0, 0, NULL, 0 },
    { "listen", 0, RUMOR_OPT_STR, offsetof(struct options, listen), 0, 0, NULL, 0 },
    { "swarm", 0, RUMOR_OPT_STR, offsetof(struct options, swarm), 0, 0, NULL, 0 },
    { "topology", 0, RUMOR_OPT_PATHS, offsetof(struct options, topology), 0, 0, "file:", 0 },
    { "weights", 0, RUMOR_OPT_PATHS, offsetof(struct options, weights), 0, 0, "file:", 0 },
    { "mode", 0, RUMOR_OPT_CHOICE, offsetof(struct options, mode), 0, 0, "dpsgd|async|allreduce", 0 },
    { "round-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, round_timeout), 0.01, 86400, NULL, 0 },
    { "min-round-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, min_round_timeout), 0.001, 86400, NULL, 0 },
    { "staleness", 0, RUMOR_OPT_INT, offsetof(struct options, staleness), 1, 1 << 20, NULL, 0 },
    { "catch-up-rounds", 0, RUMOR_OPT_LONG, offsetof(struct options, catch_up_rounds), 0, 1e9, NULL, 0 },
    { "keys", 0, RUMOR_OPT_PATH, offsetof(struct options, keys), 0, 0, NULL, 0 },
    { "allow", 0, RUMOR_OPT_PATH, offsetof(struct options, allow), 0, 0, NULL, 0 },
    { "peer-keys", 0, RUMOR_OPT_PATHS, offsetof(struct options, peer_keys), 0, 0, NULL, 1 },
    { "membership", 0, RUMOR_OPT_CHOICE, offsetof(struct options, membership), 0, 0, "static|swim", 0 },
    { "connections", 0, RUMOR_OPT_INT, offsetof(struct options, connections), 1, 8, NULL, 0 },
    { "io-threads", 0, RUMOR_OPT_INT, offsetof(struct options, io_threads), 1, 16, NULL, 0 },
    { "insecure", 0, RUMOR_OPT_FLAG, offsetof(struct options, insecure), 0, 0, NULL, 1 },
    { "local-steps", 0, RUMOR_OPT_INT, offsetof(struct options, local_steps), 1, 10000, NULL, 0 },
    { "outer", 0, RUMOR_OPT_STR, offsetof(struct options, outer), 0, 0, NULL, 0 },
    { "outer-rounds", 0, RUMOR_OPT_STR, offsetof(struct options, outer_rounds), 0, 0, NULL, 0 },
    { "fragments", 0, RUMOR_OPT_INT, offsetof(struct options, fragments), 1, 4096, NULL, 0 },
    { "overlap", 0, RUMOR_OPT_STR, offsetof(struct options, overlap), 0, 0, NULL, 0 },
    { "compress", 0, RUMOR_OPT_STR, offsetof(struct options, compress), 0, 0, NULL, 0 },
    { "consensus-step", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, consensus_step), 1e-6, 1, NULL, 0 },
    { "keyframe-every", 0, RUMOR_OPT_INT, offsetof(struct options, keyframe_every), 1, 100000, NULL, 0 },
    { "balance", 0, RUMOR_OPT_CHOICE, offsetof(struct options, balance), 0, 0, "none|batch", 0 },
    { "balance-max", 0, RUMOR_OPT_INT, offsetof(struct options, balance_max), 1, 64, NULL, 0 },
    { "throttle", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, throttle), 1, 1000, NULL, 0 },
    { "link-mbit", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, link_mbit), 0.001, 1e7, NULL, 0 },
    { "start-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, start_timeout), 0, 86400, NULL, 0 },
    { "send-ahead", 0, RUMOR_OPT_CHOICE, offsetof(struct options, send_ahead), 0, 0, "yes|no", 0 },
    { "chunk-mb", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, chunk_mb), 0.001, 64, NULL, 0 },
    { "max-message-mb", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, max_message_mb), 0.001, 1024, NULL, 0 },
    { "rounds", 0, RUMOR_OPT_LONG, offsetof(struct options, rounds), 1, 1e12, NULL, 0 },
    { "eval-every", 0, RUMOR_OPT_INT, offsetof(struct options, eval_every), 1, 100000, NULL, 0 },
    { "no-average", 0, RUMOR_OPT_FLAG, offsetof(struct options, no_average), 0, 0, NULL, 1 },
    { "save-average", 0, RUMOR_OPT_PATH, offsetof(struct options, save_average), 0, 0, NULL, 0 },
    { "allow-alone", 0, RUMOR_OPT_FLAG, offsetof(struct options, allow_alone), 0, 0, NULL, 1 },
    { "checkpoint-dir", 0, RUMOR_OPT_PATH, offsetof(struct options, checkpoint_dir), 0, 0, NULL, 0 },
    { "checkpoint-every", 0, RUMOR_OPT_LONG, offsetof(struct options, checkpoint_every), 0, 1e12, NULL, 0 },
    { "keep-checkpoints", 0, RUMOR_OPT_INT, offsetof(struct options, keep_checkpoints), 1, 1000, NULL, 0 },
    { "leave-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, leave_timeout), 0.1, 3600, NULL, 0 },
    { "metrics-listen", 0, RUMOR_OPT_STR, offsetof(struct options, metrics_listen), 0, 0, NULL, 0 },
    { "join", 0, RUMOR_OPT_STR, offsetof(struct options, join), 0, 0, NULL, 0 },
    { "advertise", 0, RUMOR_OPT_STR, offsetof(struct options, advertise), 0, 0, NULL, 0 },
    { "min-peers", 0, RUMOR_OPT_INT, offsetof(struct options, min_peers), 1, 4096, NULL, 0 },
    { "max-peers", 0, RUMOR_OPT_INT, offsetof(struct options, max_peers), 2, 65536, NULL, 0 },
    { "relay", 0, RUMOR_OPT_STR, offsetof(struct options, relay), 0, 0, NULL, 0 },
    { "relay-via", 0, RUMOR_OPT_STR, offsetof(struct options, relay_via), 0, 0, NULL, 0 },
    { "relay-max-peers", 0, RUMOR_OPT_INT, offsetof(struct options, relay_max_peers), 1, 4096, NULL, 0 },
    { "relay-mbit", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, relay_mbit), 0.001, 1e7, NULL, 0 },
    { "no-hole-punch", 0, RUMOR_OPT_FLAG, offsetof(struct options, no_hole_punch), 0, 0, NULL, 1 },
    { "robust", 0, RUMOR_OPT_STR, offsetof(struct options, robust), 0, 0, NULL, 0 },
    { "robust-val", 0, RUMOR_OPT_STR, offsetof(struct options, robust_val), 0, 0, NULL, 0 },
    RUMOR_TRAIN_OPTIONS(struct options, t),
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

int peer_usage_error(const char *msg)
{
    fprintf(stderr, "rumor-peer: %s\nTry 'rumor-peer --help' for more information.\n", msg);
    return 2;
}

/* --robust-val N[:B]: N rounds between probes, B validation batches */
static int parse_robust_val(const char *s, rumor_mixer_config_t *mc, int *batches)
{
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10), b = *batches; /* the default unless :B */
    if (end != s && !errno && *end == ':') {
        const char *bs = end + 1;
        b = strtol(bs, &end, 10);
        if (end == bs)
            b = 0;
    }
    if (end == s || *end || errno || n < 1 || n > 1000000 || b < 1 || b > 100000)
        return rumor_err_set(RUMOR_EINVAL, "--robust-val '%s': N rounds between probes, 1 or "
                             "more, and :B validation batches, 1 or more (8, or 8:4)", s);
    mc->robust_probe = (int)n;
    *batches = (int)b;
    return 0;
}

/* --robust none | clip | clip:tau=auto | clip:tau=X (X > 0) | trimmed |
 * trimmed:K (K >= 1). */
static int parse_robust(const char *s, rumor_mixer_config_t *mc)
{
    static const char form[] = "none, clip[:tau=auto|X] or trimmed[:K]";
    if (!strcmp(s, "none")) {
        mc->robust = RUMOR_ROBUST_NONE;
        return 0;
    }
    if (strncmp(s, "trimmed", 7) == 0 && (!s[7] || s[7] == ':')) {
        mc->robust = RUMOR_ROBUST_TRIMMED;
        mc->robust_trim = 1;
        if (!s[7])
            return 0;
        char *end;
        errno = 0;
        long k = strtol(s + 8, &end, 10);
        if (end == s + 8 || *end || errno || k < 1 || k > 1000)
            return rumor_err_set(RUMOR_EINVAL, "--robust '%s': K is how many of each "
                                 "element's largest and smallest values are left out, 1 or "
                                 "more (trimmed:1)", s);
        mc->robust_trim = (int)k;
        return 0;
    }
    if (strncmp(s, "clip", 4) != 0 || (s[4] && s[4] != ':'))
        return rumor_err_set(RUMOR_EINVAL, "--robust '%s': %s", s, form);
    mc->robust = RUMOR_ROBUST_CLIP;
    mc->robust_tau = 0;
    if (!s[4] || !strcmp(s + 5, "tau=auto"))
        return 0;
    char *end;
    double t = strncmp(s + 5, "tau=", 4) == 0 ? strtod(s + 9, &end) : -1;
    if (t <= 0 || !isfinite(t) || end == s + 9 || *end)
        return rumor_err_set(RUMOR_EINVAL, "--robust '%s': tau is auto or a norm > 0 "
                             "(clip:tau=0.5)", s);
    mc->robust_tau = t;
    return 0;
}

/* A list (--rank and --peers) or open membership (--listen, --join): the

 * options of one and not the other. Returns 2, or -1 when they fit. */
static int check_membership_args(struct options *o)
{
    int listed = o->rank >= 0 || o->peers || o->peers_file;
    if (!listed && !o->listen && !o->join && !o->advertise)
        return peer_usage_error("give --rank R and --peers LIST (a swarm of a fixed list), or "
                           "--listen ADDR [--join HOST:PORT] (open membership: no rank)");
    if (listed && o->rank < 0)
        return peer_usage_error("--rank is required with --peers (without both, a peer joins with "
                           "--listen ADDR --join HOST:PORT)");
    if (listed && (o->join || o->advertise || o->min_peers || o->relay_via))
        return peer_usage_error("--join, --advertise, --min-peers and --relay-via are open "
                           "membership's: without --rank and --peers");
    if (o->relay_via && o->advertise)
        return peer_usage_error("--relay-via and --advertise both say where the others reach this "
                           "peer: give one (with --relay-via, the relay's address is announced)");
    if ((o->relay_max_peers || o->relay_mbit > 0) && !o->relay)
        return peer_usage_error("--relay-max-peers and --relay-mbit limit the relay of --relay");
    if (o->no_hole_punch && !o->relay_via)
        return peer_usage_error("--no-hole-punch is for a peer reached through a relay "
                                "(--relay-via)");
    if (!o->membership)
        o->membership = listed ? "static" : "swim";
    if (listed)
        return -1;
    if (!o->listen)
        return peer_usage_error("open membership needs --listen ADDR (the address to bind)");
    if (strcmp(o->membership, "swim") != 0)
        return peer_usage_error("open membership is SWIM membership: --membership static needs "
                           "--rank and --peers");
    if (strcmp(o->mode, "dpsgd") != 0)
        return peer_usage_error(strcmp(o->mode, "async") == 0
                               ? "open membership runs --mode dpsgd (async keeps per-neighbour "
                                 "state for a fixed list)"
                               : "open membership runs --mode dpsgd (the all-reduce baseline "
                                 "needs a fixed ring of ranks)");
    if (o->peer_keys)
        return peer_usage_error("--peer-keys names the keys of a list's ranks: an open swarm's keys "
                           "are the allow-list's");
    if (strchr(o->topology, ':') && strncmp(o->topology, "rreg:", 5) != 0) {
        fprintf(stderr, "rumor-peer: open membership lays a topology family over the peers "
                        "alive ('ring', 'exp', 'torus', ...), not '%s'\n", o->topology);
        return 2;
    }
    return -1;
}

/* Option values that contradict each other (the rest of the checks are
 * the peer configuration's: rumor_peer_config_check). Returns 2, or -1
 * when they fit. */
static int check_sizes(const struct options *o)
{
    char msg[200];
    if (o->chunk_mb > 0 && o->max_message_mb < o->chunk_mb) {
        snprintf(msg, sizeof msg, "--max-message-mb %g is below --chunk-mb %g: the neighbours' "
                                  "ranges of that size would all be dropped", o->max_message_mb,
                 o->chunk_mb);
        return peer_usage_error(msg);
    }
    if (o->min_round_timeout > 0 && o->min_round_timeout > o->round_timeout) {
        snprintf(msg, sizeof msg, "--min-round-timeout %g is above --round-timeout %g (the "
                                  "shortest deadline and the longest)", o->min_round_timeout,
                 o->round_timeout);
        return peer_usage_error(msg);
    }
    return -1;
}

int peer_opts_parse(int argc, char **argv, struct options *o)
{    memset(o, 0, sizeof *o);
    rumor_train_opts_default(&o->t);
    o->t.threads = 1; /* peers often share a machine: one worker each */
    /* A swarm's rounds see N batches at once: smaller per-peer batches and a
     * larger rate suit it (8 peers, 2 epochs: 86.4% vs 84.6% with 128/0.05). */
    o->t.batch = 64;
    o->t.sgd_lr = 0.1;
    o->rank = -1;
    o->swarm = "rumor";
    o->topology = "ring";
    o->mode = "dpsgd";
    o->round_timeout = 10;
    o->min_round_timeout = 0; /* given, or 0.5 (at most --round-timeout): below */
    o->staleness = 8;
    o->catch_up_rounds = 50;
    o->throttle = 1;
    o->send_ahead = "yes"; /* docs/protocol.md, section 6 */
    o->balance = "none";
    o->balance_max = 4;
    o->local_steps = 1;
    o->fragments = 1;
    o->compress = "none";
    o->membership = NULL; /* static with a list; open membership is swim */
    o->max_peers = 256;
    o->relay_max_peers = 0; /* given, or the relay's default */
    o->start_timeout = 60;
    o->chunk_mb = 0; /* 1 MiB, or an eighth of a smaller model (below) */
    o->max_message_mb = 64;
    o->eval_every = 1;
    o->keep_checkpoints = 3;
    o->leave_timeout = 10;
    int rc = rumor_train_opts_parse("rumor-peer", option_table, o, argc, argv, usage_head, usage_tail);
    if (rc >= 0)
        return rc;
    rc = check_membership_args(o);
    if (rc >= 0)
        return rc;
    rc = check_sizes(o);
    if (rc >= 0)
        return rc;
    if (o->min_round_timeout == 0)
        o->min_round_timeout = o->round_timeout < 0.5 ? o->round_timeout : 0.5;
    /* --listen HOST:PORT or tcp://HOST:PORT; a name becomes its address */
    if (o->listen && rumor_peerlist_bind_endpoint(o->listen, o->listen_ep,
                                                  sizeof o->listen_ep) < 0) {
        fprintf(stderr, "rumor-peer: --listen: %s\n", rumor_err_msg());
        return 2;
    }
    /* the value alone, with the others (binding comes in main) */
    if (o->metrics_listen && rumor_prom_check_listen(o->metrics_listen) < 0 &&
        rumor_err_code() == RUMOR_EINVAL) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    rumor_train_opts_apply_log(&o->t);
    return -1;
}

int peer_opts_config(const struct options *o, rumor_peer_config_t *c)
{
    rumor_peer_config_default(c);
    if (rumor_codec_parse(o->compress, &c->mixer.codec) < 0) { /* before joining anyone */
        fprintf(stderr, "rumor-peer: --compress: %s\n", rumor_err_msg());
        return 2;
    }
    c->mode = !strcmp(o->mode, "async")       ? RUMOR_PEER_ASYNC
              : !strcmp(o->mode, "allreduce") ? RUMOR_PEER_ALLREDUCE
                                              : RUMOR_PEER_DPSGD;
    c->rounds = o->rounds;
    c->local_steps = o->local_steps;
    c->outer = o->outer;
    if (o->outer_rounds && !strcmp(o->outer_rounds, "period")) {
        c->outer_rounds = 0;
    } else if (o->outer_rounds) {
        char *end;
        long v = strtol(o->outer_rounds, &end, 10);
        if (end == o->outer_rounds || *end || v < 1 || v > 4096) {
            fprintf(stderr, "rumor-peer: --outer-rounds '%s': expected a number of rounds, 1 to "
                            "4096, or period\n", o->outer_rounds);
            return 2;
        }
        c->outer_rounds = (int)v;
    }
    c->fragments = o->fragments;
    if (o->overlap) { /* S[:alpha=A] */
        char *end;
        long v = strtol(o->overlap, &end, 10);
        double a = -1;
        if (end != o->overlap && !strncmp(end, ":alpha=", 7)) {
            char *e2;
            a = strtod(end + 7, &e2);
            end = e2 != end + 7 && a >= 0 && a <= 1 ? e2 : end;
        }
        if (end == o->overlap || *end || v < 0 || v > 10000) {
            fprintf(stderr, "rumor-peer: --overlap '%s': expected S[:alpha=A], S steps from 0 "
                            "to 10000 and A from 0 to 1\n", o->overlap);
            return 2;
        }
        c->overlap = (int)v;
        c->merge = a;
    }
    c->balance = !strcmp(o->balance, "batch");
    c->balance_max = o->balance_max;
    c->send_ahead = !strcmp(o->send_ahead, "yes");
    c->throttle = o->throttle;
    c->link_mbit = o->link_mbit;
    c->catch_up_rounds = o->catch_up_rounds;
    c->start_timeout = o->start_timeout;
    c->swarm = o->swarm;
    c->topology = o->topology;
    c->compress = o->compress;
    c->rank = o->rank;
    c->swim = strcmp(o->membership, "swim") == 0;
    c->checkpoint_dir = o->checkpoint_dir;
    c->checkpoint_every = o->checkpoint_every;
    c->keep_checkpoints = o->keep_checkpoints;
    c->eval_every = o->eval_every;
    c->no_average = o->no_average;
    c->allow_alone = o->allow_alone;
    c->save_average = o->save_average;
    c->metrics = o->t.metrics;
    c->trace = o->t.trace;
    c->quiet = o->t.quiet;
    c->progress = o->t.progress;
    rumor_mixer_config_t *mc = &c->mixer;
    mc->listen = o->listen_ep;
    mc->swarm = rumor_wire_swarm_id(o->swarm);
    /* 0: 1 MiB, or an eighth of a smaller model (the peer decides) */
    mc->chunk_elems = (size_t)(o->chunk_mb * 1048576.0 / sizeof(float));
    if (o->chunk_mb > 0 && mc->chunk_elems < 1)
        mc->chunk_elems = 1;
    mc->max_msg_elems = (size_t)(o->max_message_mb * 1048576.0 / sizeof(float));
    if (mc->max_msg_elems < 1)
        mc->max_msg_elems = 1;
    mc->round_timeout = o->round_timeout;
    mc->min_round_timeout = o->min_round_timeout;
    mc->staleness = o->staleness;
    mc->conns_per_peer = o->connections;
    if (o->robust && parse_robust(o->robust, mc) < 0)
        return peer_usage_error(rumor_err_msg());
    if (o->robust_val && parse_robust_val(o->robust_val, mc, &c->robust_val_batches) < 0)
        return peer_usage_error(rumor_err_msg());
    if (mc->robust_probe && !mc->robust)
        return peer_usage_error("--robust-val scores neighbours for robust mixing: it needs "
                                "--robust clip or trimmed");
    if (mc->robust && c->mode != RUMOR_PEER_DPSGD)
        return peer_usage_error("--robust judges each neighbour's parameters in synchronous "
                                "D-PSGD rounds: not with --mode async or allreduce");
    if (mc->robust && mc->codec.kind != RUMOR_CODEC_NONE)
        return peer_usage_error("--robust judges each neighbour's parameters: not with "
                                "--compress (what goes out is a coded change)");
    mc->io_threads = o->io_threads;
    mc->consensus_step = o->consensus_step;
    mc->keyframe_every = o->keyframe_every;
    if (rumor_peer_config_check(c) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    return -1;
}
