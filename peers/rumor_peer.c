/* rumor-peer: one peer of a swarm that trains one model with D-PSGD.
 *
 * Every peer runs the same program with the same list of peers, the same
 * topology and the same seed, and its own --rank. Each round it sends its
 * parameters to its neighbours while it computes its gradient on its shard of
 * the data, mixes what arrived (Metropolis-Hastings weights by default) and
 * takes its optimizer step (Lian et al. 2017). --mode allreduce trains the
 * same model with a ring all-reduce of gradients instead (C-PSGD), over the
 * same sockets, as the baseline to compare with. At the end each peer reports
 * the test accuracy of its own model and of the swarm's average. */
#include "config.h"

#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "balance.h"
#include "blas_tune.h"
#include "catchup.h"
#include "checkpoint.h"
#include "dirs.h"
#include "log.h"
#include "mixer.h"
#include "outer.h"
#include "peer_open.h"
#include "peerlist.h"
#include "progress.h"
#include "promserve.h"
#include "terms.h"
#include "topology.h"
#include "trainer.h"
#include "trainopts.h"

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
    "                         is looked up) (default: this peer's endpoint in the\n"
    "                         list; required in an open swarm; tcp://0.0.0.0:PORT\n"
    "                         listens on every interface); tried before the data\n"
    "                         loads\n"
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
    "                         --peers; an open swarm is always swim)\n"
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
    "  --outer SPEC           with --local-steps H, H >= 2: all H steps first, then\n"
    "                         the gossip, and an outer optimizer steps the round's\n"
    "                         start by the change the mix proposes (DiLoCo on a\n"
    "                         graph):\n"
    "                         nesterov[:lr=X,momentum=Y] (lr in (0, 10], default 0.7;\n"
    "                         momentum in [0, 1), default 0.9) or sgd[:lr=X] (lr 1:\n"
    "                         the mix itself); its state is not checkpointed: a\n"
    "                         resumed peer starts it anew (default: none)\n"
    "  --compress CODEC       compressed gossip, CHOCO-SGD with error feedback: none,\n"
    "                         int8, int4, topk:F or randk:F (F in (0, 1], the share\n"
    "                         of elements sent); every peer of a swarm must use the\n"
    "                         same codec (see docs/compression.md); with --mode\n"
    "                         allreduce, int8 or int4 gradients (default: none)\n"
    "  --consensus-step G     with --compress: CHOCO's consensus step gamma in (0, 1]\n"
    "                         (default: the codec's: 1 int8, 0.8 int4, 2F topk, F\n"
    "                         randk)\n"
    "  --keyframe-every R     with --compress: every R-th round sends full f32\n"
    "                         parameters, which resynchronizes the peers' copies\n"
    "                         after a lost round (default: the codec's: 16 int8,\n"
    "                         32 int4, the ratio of f32 to topk or randk, at least\n"
    "                         16), 1 to 100000\n"
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

struct options {
    struct rumor_train_opts t;
    int balance_max, local_steps;
    const char *balance, *outer, *compress, *send_ahead;
    double consensus_step;
    int keyframe_every;
    int rank, eval_every, no_average, keep_checkpoints, staleness, insecure, connections,
        io_threads, allow_alone;
    const char *keys, *allow, *peer_keys, *membership;
    long checkpoint_every, catch_up_rounds, rounds;
    const char *peers, *peers_file, *listen, *swarm, *topology, *weights, *mode, *checkpoint_dir,
        *save_average;
    double round_timeout, min_round_timeout, start_timeout, chunk_mb, max_message_mb,
        leave_timeout, throttle;
    const char *metrics_listen;
    const char *join, *advertise; /* open membership */
    int min_peers, max_peers;
    char listen_ep[600]; /* --listen as the endpoint to bind (a name resolved) */
};

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
    { "compress", 0, RUMOR_OPT_STR, offsetof(struct options, compress), 0, 0, NULL, 0 },
    { "consensus-step", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, consensus_step), 1e-6, 1, NULL, 0 },
    { "keyframe-every", 0, RUMOR_OPT_INT, offsetof(struct options, keyframe_every), 1, 100000, NULL, 0 },
    { "balance", 0, RUMOR_OPT_CHOICE, offsetof(struct options, balance), 0, 0, "none|batch", 0 },
    { "balance-max", 0, RUMOR_OPT_INT, offsetof(struct options, balance_max), 1, 64, NULL, 0 },
    { "throttle", 0, RUMOR_OPT_DOUBLE, offsetof(struct options, throttle), 1, 1000, NULL, 0 },
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
    RUMOR_TRAIN_OPTIONS(struct options, t),
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

/* The peer list, from --peers (commas) or --peers-file (lines), and the
 * --listen address: gossip/peerlist.c parses them and refuses a port outside
 * 1-65535 (ZeroMQ would wrap it) or 0 (an ephemeral port: the others dial
 * the listed endpoint, so they could not reach it). */
static int read_peers(const struct options *o, rumor_peerlist_t *pl)
{
    memset(pl, 0, sizeof *pl);
    if (!!o->peers == !!o->peers_file)
        return rumor_err_set(RUMOR_EINVAL, "give the peer list with exactly one of --peers and "
                                           "--peers-file");
    return o->peers ? rumor_peerlist_parse_string(o->peers, pl)
                    : rumor_peerlist_parse_file(o->peers_file, pl);
}

/* Everything a peer owns, released in one place. */
struct peer {
    rumor_peerlist_t pl;
    rumor_topo_t *topo;
    rumor_trainer_t *tr;      /* device, data, model, optimizer, workers */
    rumor_mixer_t *mixer;
    float *avg;
    rumor_metrics_t metrics;
    rumor_trace_t *trace;     /* --trace: compute and gossip, a row each */
    rumor_curve_keypair_t *keys;
    uint8_t (*peer_keys)[32];
    rumor_allowlist_t *allow;
    rumor_outer_t *outer;     /* --outer: the anchor and momentum */
    rumor_prom_t *prom;       /* --metrics-listen: Prometheus metrics */
    rumor_prom_snapshot_t snap; /* what it shows: updated after each round */
    rumor_peer_open_t open;   /* open membership (no --rank): --join, the id */
    int is_open;
    long ckpt_tried, ckpt_failed; /* checkpoints written and failed */
    char ckpt_err[400];           /* the last failure */
};

/* A public key given as 40 Z85 characters or as a key file. */
static int parse_public(const char *s, uint8_t pk[32])
{
    if (strlen(s) == RUMOR_CURVE_Z85_LEN && rumor_curve_z85_decode(s, pk) == 0)
        return 0;
    return rumor_curve_read_public(s, pk);
}

/* Secure mode: this peer's keypair and the allow-list. */
static int load_keys(struct peer *p, const struct options *o)
{
    if (!o->keys || !o->allow)
        return rumor_err_set(RUMOR_EINVAL,
                             "secure mode needs --keys (this peer's secret key: make one with "
                             "'rumor-peer keygen PREFIX') and --allow (the swarm's public keys); "
                             "CURVE without an allow-list would admit anyone. --insecure runs "
                             "plaintext");
    p->keys = calloc(1, sizeof *p->keys);
    if (!p->keys)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    RUMOR_CHECK(rumor_curve_read_keys(o->keys, p->keys));
    RUMOR_CHECK(rumor_allowlist_load(o->allow, &p->allow));
    if (p->pl.n == 0 && !rumor_allowlist_contains(p->allow, p->keys->public_key))
        rumor_warn("this peer's own key is not on the allow-list %s: the others will refuse it",
                   o->allow);
    return 0;
}

/* Secure mode with a list: also every peer's public key (peers file
 * column, --peer-keys, or the allow-list entry peer-R). */
static int load_security(struct peer *p, const struct options *o)
{
    RUMOR_CHECK(load_keys(p, o));
    p->peer_keys = calloc((size_t)p->pl.n, sizeof *p->peer_keys);
    if (!p->peer_keys)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    char *list = o->peer_keys ? strdup(o->peer_keys) : NULL, *save = NULL;
    char *tok = list ? strtok_r(list, ",", &save) : NULL;
    int rc = 0;
    for (int j = 0; rc == 0 && j < p->pl.n; j++, tok = tok ? strtok_r(NULL, ",", &save) : NULL) {
        char name[32];
        snprintf(name, sizeof name, "peer-%d", j);
        if (p->pl.key[j])
            rc = parse_public(p->pl.key[j], p->peer_keys[j]);
        else if (tok)
            rc = parse_public(tok, p->peer_keys[j]);
        else if (!rumor_allowlist_lookup_name(p->allow, name, p->peer_keys[j]))
            rc = rumor_err_set(RUMOR_EINVAL, "no public key for peer %d: give it in the peers "
                                             "file's second column, in --peer-keys, or as the "
                                             "allow-list entry named %s", j, name);
        if (rc == 0 && !rumor_allowlist_contains(p->allow, p->peer_keys[j]))
            rc = rumor_err_set(RUMOR_EAUTH, "peer %d's public key is not on the allow-list %s", j,
                               o->allow);
    }
    if (rc == 0 && o->peer_keys && tok)
        rc = rumor_err_set(RUMOR_EINVAL, "--peer-keys lists more keys than there are peers");
    free(list);
    return rc;
}

/* rumor-peer keygen [--force] PREFIX...: new keypairs. */
static int keygen_main(int argc, char **argv)
{
    int force = 0, made = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0) {
            force = 1;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("Usage: rumor-peer keygen [--force] PREFIX...\n"
                   "Writes a new CurveZMQ keypair for each PREFIX: PREFIX.key, the secret key\n"
                   "(mode 0600, given to this peer's --keys), and PREFIX.pub, the public key\n"
                   "(put it in every peer's --allow list or directory). Existing files are\n"
                   "kept unless --force. Prints each public key.\n");
            return 0;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "rumor-peer keygen: unknown option '%s'\n", argv[i]);
            return 2;
        }
        rumor_curve_keypair_t kp;
        if (rumor_curve_keygen(&kp) < 0 || rumor_curve_write_keys(argv[i], &kp, force) < 0) {
            fprintf(stderr, "rumor-peer keygen: %s\n", rumor_err_msg());
            rumor_curve_keypair_clear(&kp);
            return 1;
        }
        printf("%s  %s.pub\n", kp.public_z85, argv[i]);
        rumor_curve_keypair_clear(&kp);
        made++;
    }
    if (!made) {
        fprintf(stderr, "rumor-peer keygen: give a PREFIX (writes PREFIX.key and PREFIX.pub)\n");
        return 2;
    }
    return 0;
}

/* What a SIGTERM or SIGINT acts on (on_leave_signal, below) */
static rumor_mixer_t *volatile hurry_mixer; /* NULL once destroyed */
static volatile sig_atomic_t joining_started; /* the mixer was made: leave through it */

static void peer_free(struct peer *p)
{
    hurry_mixer = NULL; /* a signal from here on has no mixer to hurry */
    rumor_mixer_destroy(&p->mixer, 5.0);
    rumor_prom_stop(&p->prom); /* after: scrapes see the phase while LEAVE flushes */
    rumor_metrics_close(&p->metrics);
    if (rumor_trace_close(&p->trace) < 0)
        rumor_warn("%s", rumor_err_msg());
    rumor_trainer_destroy(&p->tr);
    rumor_outer_destroy(&p->outer);
    rumor_topo_destroy(&p->topo);
    free(p->avg);
    free(p->pl.ep);
    free(p->pl.buf);
    free(p->pl.key);
    free(p->pl.keybuf);
    if (p->keys)
        rumor_curve_keypair_clear(p->keys);
    free(p->keys);
    free(p->peer_keys);
    rumor_allowlist_destroy(&p->allow);
    rumor_peer_open_free(&p->open);
}

/* "rumor-peer 3" (a list's rank) or "rumor-peer 1a2b3c4d" (open membership:
 * the id's first 8 hex digits), for messages. */
static char label[48] = "rumor-peer";

static int fail(struct peer *p, const char *what)
{
    if (what)
        fprintf(stderr, "%s: %s: %s\n", label, what, rumor_err_msg());
    else
        fprintf(stderr, "%s: %s\n", label, rumor_err_msg());
    rumor_debug("error trace: %s", rumor_err_trace());
    peer_free(p);
    return 1;
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "rumor-peer: %s\nTry 'rumor-peer --help' for more information.\n", msg);
    return 2;
}

/* A list (--rank and --peers) or open membership (--listen, --join): the
 * options of one and not the other. Returns 2, or -1 when they fit. */
static int check_membership_args(struct options *o)
{
    int listed = o->rank >= 0 || o->peers || o->peers_file;
    if (!listed && !o->listen && !o->join && !o->advertise)
        return usage_error("give --rank R and --peers LIST (a swarm of a fixed list), or "
                           "--listen ADDR [--join HOST:PORT] (open membership: no rank)");
    if (listed && o->rank < 0)
        return usage_error("--rank is required with --peers (without both, a peer joins with "
                           "--listen ADDR --join HOST:PORT)");
    if (listed && (o->join || o->advertise || o->min_peers))
        return usage_error("--join, --advertise and --min-peers are open membership's: without "
                           "--rank and --peers");
    if (!o->membership)
        o->membership = listed ? "static" : "swim";
    if (listed)
        return -1;
    if (!o->listen)
        return usage_error("open membership needs --listen ADDR (the address to bind)");
    if (strcmp(o->membership, "swim") != 0)
        return usage_error("open membership is SWIM membership: --membership static needs "
                           "--rank and --peers");
    if (strcmp(o->mode, "dpsgd") != 0)
        return usage_error(strcmp(o->mode, "async") == 0
                               ? "open membership runs --mode dpsgd (async keeps per-neighbour "
                                 "state for a fixed list)"
                               : "open membership runs --mode dpsgd (the all-reduce baseline "
                                 "needs a fixed ring of ranks)");
    if (o->peer_keys)
        return usage_error("--peer-keys names the keys of a list's ranks: an open swarm's keys "
                           "are the allow-list's");
    if (strchr(o->topology, ':') && strncmp(o->topology, "rreg:", 5) != 0) {
        fprintf(stderr, "rumor-peer: open membership lays a topology family over the peers "
                        "alive ('ring', 'exp', 'torus', ...), not '%s'\n", o->topology);
        return 2;
    }
    return -1;
}

/* Options that only mean something together, or whose values contradict
 * each other: refused with the reason (item by item in --help). Returns
 * 2, or -1 when they fit. */
static int check_consistency(const struct options *o, const rumor_codec_t *codec)
{
    if (o->outer && o->local_steps < 2)
        return usage_error("--outer steps each round's start by what H local steps and the mix "
                           "propose (DiLoCo): it needs --local-steps H with H >= 2");
    if (codec->kind == RUMOR_CODEC_NONE && o->keyframe_every)
        return usage_error("--keyframe-every sets how often compressed gossip sends full "
                           "parameters: it needs --compress");
    if (codec->kind == RUMOR_CODEC_NONE && o->consensus_step > 0)
        return usage_error("--consensus-step is compressed gossip's (CHOCO-SGD's) step: it needs "
                           "--compress");
    if (o->chunk_mb > 0 && o->max_message_mb < o->chunk_mb) {
        char msg[200];
        snprintf(msg, sizeof msg, "--max-message-mb %g is below --chunk-mb %g: the neighbours' "
                                  "ranges of that size would all be dropped", o->max_message_mb,
                 o->chunk_mb);
        return usage_error(msg);
    }
    if (o->min_round_timeout > 0 && o->min_round_timeout > o->round_timeout) {
        char msg[200];
        snprintf(msg, sizeof msg, "--min-round-timeout %g is above --round-timeout %g (the "
                                  "shortest deadline and the longest)", o->min_round_timeout,
                 o->round_timeout);
        return usage_error(msg);
    }
    return -1;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
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
    o->compress = "none";
    o->membership = NULL; /* static with a list; open membership is swim */
    o->max_peers = 256;
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
    if (o->local_steps > 1 && !strcmp(o->mode, "allreduce")) {
        fprintf(stderr, "rumor-peer: --local-steps gossips parameters every H steps: it needs "
                        "--mode dpsgd or async (not allreduce)\n");
        return 2;
    }
    if (o->outer && strcmp(o->mode, "dpsgd") != 0) {
        fprintf(stderr, "rumor-peer: --outer steps after each synchronous round: it needs "
                        "--mode dpsgd (not %s)\n", o->mode);
        return 2;
    }
    rumor_outer_config_t oc;
    if (o->outer && rumor_outer_parse(o->outer, &oc) < 0) { /* before joining anyone */
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    rumor_codec_t codec;
    if (rumor_codec_parse(o->compress, &codec) < 0) { /* before joining anyone */
        fprintf(stderr, "rumor-peer: --compress: %s\n", rumor_err_msg());
        return 2;
    }
    if (codec.kind != RUMOR_CODEC_NONE && !strcmp(o->mode, "async")) {
        fprintf(stderr, "rumor-peer: --compress %s is compressed gossip in synchronous "
                        "rounds: it needs --mode dpsgd or allreduce (not async)\n", o->compress);
        return 2;
    }
    if (!strcmp(o->mode, "allreduce") && codec.kind != RUMOR_CODEC_NONE &&
        codec.kind != RUMOR_CODEC_INT8 && codec.kind != RUMOR_CODEC_INT4) {
        fprintf(stderr, "rumor-peer: --compress %s: the all-reduce's codecs are int8 and int4 "
                        "(sums of sparse ranges are not sparse)\n", o->compress);
        return 2;
    }
    if (!strcmp(o->balance, "batch") && strcmp(o->mode, "dpsgd") != 0) {
        fprintf(stderr, "rumor-peer: --balance batch fills the time a peer waits for its "
                        "neighbours: it needs --mode dpsgd (not %s)\n", o->mode);
        return 2;
    }
    rc = check_consistency(o, &codec);
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

/* Evaluates parameters `params` with the peer's model (then puts its own
 * parameters back). */
/* For round metrics: messages rejected, and connections admitted and
 * refused by kind, so far. */
static unsigned long long live_rejected(rumor_mixer_t *m)
{
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(m, &ws);
    return (unsigned long long)rumor_wire_stats_rejected(&ws);
}

static const char *live_connections(rumor_mixer_t *m, char *buf, size_t cap)
{
    rumor_transport_stats_t ts;
    rumor_mixer_transport_stats(m, &ts);
    if (rumor_transport_stats_json(&ts, buf, cap) < 0)
        snprintf(buf, cap, "{}");
    return buf;
}

static int trainer_params_ready(void *tr)
{
    return rumor_trainer_params_ready(tr);
}

static int evaluate(struct peer *p, float *params, double *acc, double *loss)
{
    rumor_eval_t e;
    RUMOR_CHECK(rumor_trainer_evaluate(p->tr, params, &e));
    *acc = e.accuracy; /* -1 for a language model */
    *loss = e.loss;
    return 0;
}

/* ------------------------------------------------------ preemption */

static volatile sig_atomic_t leave_signal;
static unsigned leave_alarm_s = 10;

/* SIGTERM/SIGINT: end the round at once and leave; a watchdog alarm bounds
 * how long leaving may take. Only async-signal-safe calls here. */
static void on_leave_signal(int sig)
{
    if (leave_signal)
        return;
    if (!joining_started) {
        /* still loading: nothing saved, nobody joined; a plain stop is a
         * success for systemd and compose */
        static const char msg[] = "rumor-peer: stopped by a signal before joining the swarm\n";
        if (write(2, msg, sizeof msg - 1) < 0) {
            /* nothing more to do */
        }
        _exit(0);
    }
    leave_signal = sig;
    rumor_mixer_t *m = hurry_mixer;
    if (m)
        rumor_mixer_hurry(m);
    alarm(leave_alarm_s);
}

static void on_leave_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "rumor-peer: leaving took longer than --leave-timeout; exiting now\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(1);
}

static void catch_leave_signals(double timeout)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_leave_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_leave_alarm;
    sigaction(SIGALRM, &sa, NULL);
    leave_alarm_s = timeout < 1 ? 1 : (unsigned)ceil(timeout);
}

static void sleep_unless_leaving(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && !leave_signal)
        ;
}

/* The settings every peer of the swarm must share (terms.h), sent in every
 * HELLO: a neighbour that differs is named and not mixed with. Dropout is
 * left out of the model's (peers may differ in it: the parameters mean the
 * same). */
static int build_terms(const struct options *o, const rumor_trainer_t *tr,
                       const rumor_codec_t *codec, char *buf, size_t cap)
{
    char v[512];
    buf[0] = '\0';
    snprintf(v, sizeof v, "%s", tr->model->spec);
    char *d = strstr(v, "dropout=");
    if (d && d > v && (d[-1] == ':' || d[-1] == ','))
        d[-1] = '\0';
    RUMOR_CHECK(rumor_terms_add(buf, cap, "model", v));
    RUMOR_CHECK(rumor_terms_add(buf, cap, "mode", o->mode));
    rumor_codec_format(codec, v, sizeof v);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "compress", v));
    if (codec->kind != RUMOR_CODEC_NONE) {
        snprintf(v, sizeof v, "%d", o->keyframe_every > 0 ? o->keyframe_every
                                                          : rumor_codec_default_keyframe(codec));
        RUMOR_CHECK(rumor_terms_add(buf, cap, "keyframe-every", v));
    }
    snprintf(v, sizeof v, "%d", o->local_steps);
    RUMOR_CHECK(rumor_terms_add(buf, cap, "local-steps", v));
    rumor_outer_config_t oc;
    if (!o->outer)
        snprintf(v, sizeof v, "none");
    else if (rumor_outer_parse(o->outer, &oc) < 0) /* checked with the arguments */
        return RUMOR_EINVAL;
    else if (oc.kind == RUMOR_OUTER_NESTEROV)
        snprintf(v, sizeof v, "nesterov:lr=%g,momentum=%g", oc.lr, oc.momentum);
    else
        snprintf(v, sizeof v, "sgd:lr=%g", oc.lr);
    return rumor_terms_add(buf, cap, "outer", v);
}

/* SIGTERM or SIGINT while joining (the barrier, the state fetch at start):
 * nothing trained, nothing to save; the neighbours are told (LEAVE) and the
 * stop is a success. Returns the exit status, 0. */
static int leave_before_training(struct peer *p, const char *pname)
{
    rumor_prom_set_phase(p->prom, RUMOR_PROM_LEAVING);
    printf("%s: left before training began, on signal %d\n", pname, (int)leave_signal);
    rumor_metrics_write(&p->metrics, "\"event\":\"leave\",\"round\":-1,\"signal\":%d,"
                                     "\"checkpoint\":false", (int)leave_signal);
    peer_free(p);
    return 0;
}

/* Writes a checkpoint of the peer's state after `round` rounds. */
static int save_checkpoint(struct peer *p, const struct options *opts, long round)
{
    int rc = rumor_trainer_save(p->tr, opts->checkpoint_dir,
                                p->is_open ? p->open.ckpt_swarm : opts->swarm,
                                p->is_open ? 0 : opts->rank, round,
                                opts->keep_checkpoints);
    p->ckpt_tried++;
    if (rc < 0) {
        /* an error, not a warning: the run is not protected. Training goes
         * on (the next one may work); the final line and the exit status
         * say it */
        p->ckpt_failed++;
        snprintf(p->ckpt_err, sizeof p->ckpt_err, "round %ld: %s", round, rumor_err_msg());
        rumor_error("checkpoint at round %ld failed: %s", round, rumor_err_msg());
    }
    if (rc == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        p->snap.checkpoint_unix = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
        rumor_prom_publish(p->prom, &p->snap);
    }
    return rc;
}

/* A swarm of a list (--rank, --peers): the list, the keys, the graph.
 * Returns an exit status, or -1 to go on. */
static int setup_list(struct peer *p, const struct options *opts)
{
    int rank = opts->rank;
    if (read_peers(opts, &p->pl) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    int N = p->pl.n;
    if (rank >= N) {
        fprintf(stderr, "rumor-peer: --rank %d but the peer list has %d endpoint%s\n", rank, N,
                N == 1 ? "" : "s");
        return 2;
    }
    if (!p->pl.ep[rank]) {
        fprintf(stderr, "rumor-peer: --rank %d: this peer's own entry in the peer list is '-'; "
                        "give the address the others reach it at\n", rank);
        return 2;
    }
    if (p->pl.unknown && strcmp(opts->membership, "swim") != 0) {
        fprintf(stderr, "rumor-peer: the peer list has %d entr%s given as '-' (address not "
                        "known): only --membership swim learns addresses from the swarm\n",
                p->pl.unknown, p->pl.unknown == 1 ? "y" : "ies");
        return 2;
    }
    /* ---- security: CurveZMQ unless --insecure */
    if (opts->insecure) {
        fprintf(stderr, "rumor-peer %d: WARNING: --insecure: plaintext gossip; anyone who can "
                        "reach this port can join the swarm, read its parameters and poison "
                        "them\n", rank);
    } else if (load_security(p, opts) < 0) {
        fprintf(stderr, "rumor-peer %d: security: %s\n", rank, rumor_err_msg());
        return rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
    }
    /* ---- topology: the same spec string as rumor-topo */
    char spec[512];
    if (strchr(opts->topology, ':'))
        snprintf(spec, sizeof spec, "%s", opts->topology);
    else
        snprintf(spec, sizeof spec, "%s:%d", opts->topology, N);
    int rc = rumor_topo_parse(spec, &p->topo);
    if (rc == 0 && p->topo->n != N)
        rc = rumor_err_set(RUMOR_EINVAL, "'%s' has %d peers but the peer list has %d", spec,
                           p->topo->n, N);
    if (rc < 0) {
        fprintf(stderr, "rumor-peer %d: topology: %s\n", rank, rumor_err_msg());
        return 1;
    }
    if (opts->weights && rumor_topo_set_weights(p->topo, opts->weights) < 0) {
        fprintf(stderr, "rumor-peer %d: weights: %s\n", rank, rumor_err_msg());
        return 1;
    }
    return -1;
}

/* An open swarm (--listen, --join, no rank): the keys, the join addresses
 * and this peer's id. Returns an exit status, or -1 to go on. */
static int setup_open(struct peer *p, const struct options *opts)
{
    if (opts->insecure)
        fprintf(stderr, "rumor-peer: WARNING: --insecure: plaintext gossip; anyone who can reach "
                        "this port can join the swarm, read its parameters and poison them\n");
    else if (load_keys(p, opts) < 0) {
        fprintf(stderr, "rumor-peer: security: %s\n", rumor_err_msg());
        return rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
    }
    if (rumor_peer_open_init(&p->open, opts->join, opts->listen, opts->advertise, opts->swarm,
                             p->keys, p->allow) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        return 2;
    }
    if (opts->weights && strcmp(opts->weights, "mh") != 0) {
        fprintf(stderr, "rumor-peer: --weights %s: a graph over the living takes "
                        "Metropolis-Hastings weights (each peer's row from the degrees it sees)\n",
                opts->weights);
        return 2;
    }
    return -1;
}

/* --save-average: the swarm average into DIR; where that fails (the disk
 * filled, the directory went away), into the checkpoint directory or a new
 * temporary one instead, named on stderr, so that the run's result is not
 * lost. Returns 0 when it went where asked, 1 otherwise. */
static int save_average(struct peer *p, const struct options *o, const char *swarm, int rank,
                        long round, const char *pname)
{
    char name[200], file[256] = "";
    snprintf(name, sizeof name, "%s-average", swarm);
    RUMOR_IGNORE(rumor_ckpt_filename(name, rank, round, file, sizeof file));
    if (rumor_trainer_save_params(p->tr, p->avg, o->save_average, name, rank, round) == 0) {
        printf("%s: swarm average saved to %s/%s\n", pname, o->save_average, file);
        return 0;
    }
    char why[600], tmpdir[512];
    snprintf(why, sizeof why, "%s", rumor_err_msg());
    const char *dir = NULL;
    if (o->checkpoint_dir && strcmp(o->checkpoint_dir, o->save_average) != 0 &&
        rumor_trainer_save_params(p->tr, p->avg, o->checkpoint_dir, name, rank, round) == 0)
        dir = o->checkpoint_dir;
    if (!dir) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/rumor-average-XXXXXX", t && *t ? t : "/tmp");
        if (mkdtemp(tmpdir) &&
            rumor_trainer_save_params(p->tr, p->avg, tmpdir, name, rank, round) == 0)
            dir = tmpdir;
    }
    if (dir)
        fprintf(stderr, "%s: --save-average %s: %s; the swarm average is saved to %s/%s "
                        "instead\n", label, o->save_average, why, dir, file);
    else
        fprintf(stderr, "%s: --save-average %s: %s; no other place could take the swarm "
                        "average either (%s)\n", label, o->save_average, why, rumor_err_msg());
    return 1;
}

/* What can be checked before the data loads and before joining anyone:
 * the directories the run writes into and the address it listens on.
 * Returns an exit status (2: usage, 1: the address is in use), or -1. */
static int check_at_start(struct peer *p, struct options *o)
{
    const struct {
        const char *dir, *flag;
    } outs[] = { { o->checkpoint_dir, "--checkpoint-dir" }, { o->save_average, "--save-average" } };
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++)
        if (outs[i].dir && rumor_dir_prepare(outs[i].dir) < 0) {
            fprintf(stderr, "rumor-peer: %s: %s\n", outs[i].flag, rumor_err_msg());
            return 2;
        }
    /* a list's peer binds its own entry unless --listen says otherwise */
    if (!o->listen_ep[0] &&
        rumor_peerlist_bind_endpoint(p->pl.ep[o->rank], o->listen_ep, sizeof o->listen_ep) < 0) {
        fprintf(stderr, "rumor-peer: peer list entry %d: %s\n", o->rank, rumor_err_msg());
        return 2;
    }
    if (rumor_peerlist_try_bind(o->listen_ep) < 0) {
        fprintf(stderr, "rumor-peer: %s%s\n", rumor_err_msg(),
                rumor_err_code() == RUMOR_EINVAL ? " (give --listen an address of this machine, "
                                                   "or tcp://0.0.0.0:PORT for all of them)"
                                                 : "");
        return rumor_err_code() == RUMOR_EINVAL ? 2 : 1;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
        return keygen_main(argc, argv);
    catch_leave_signals(10); /* a stop at once is a clean one (on_leave_signal) */
    rumor_blas_autotune(argc, argv);
    /* ZeroMQ allocates each received chunk (1 MiB): keep freed chunks in the
     * heap instead of returning them to the kernel and faulting them in
     * again every round (about 4x fewer page faults per round). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    struct options opts;
    int rc = parse_args(argc, argv, &opts);
    if (rc >= 0)
        return rc;
    struct rumor_train_opts o = opts.t;
    catch_leave_signals(opts.leave_timeout); /* the watchdog's time */
    struct peer p;
    memset(&p, 0, sizeof p);
    p.is_open = opts.rank < 0;
    int rank = p.is_open ? 0 : opts.rank;
    rc = p.is_open ? setup_open(&p, &opts) : setup_list(&p, &opts);
    if (rc < 0)
        rc = check_at_start(&p, &opts);
    if (rc >= 0) {
        peer_free(&p);
        return rc;
    }
    /* ---- --metrics-listen: serving from here on, every family in phase
     * "starting" while the data loads; a bad address stops the peer before
     * the data loads and before it joins anyone */
    rumor_prom_snapshot_init(&p.snap);
    p.snap.rank = p.is_open ? -1 : rank;
    if (p.is_open)
        snprintf(p.snap.peer, sizeof p.snap.peer, "%016llx", (unsigned long long)p.open.id);
    p.snap.peers = p.is_open ? 1 : p.pl.n;
    if (opts.metrics_listen && rumor_prom_start(opts.metrics_listen, &p.snap, &p.prom) < 0) {
        fprintf(stderr, "rumor-peer: %s\n", rumor_err_msg());
        /* the value (or a build without the server): usage; in use: runtime */
        rc = rumor_err_code() == RUMOR_EINVAL || rumor_err_code() == RUMOR_ENOTSUP ? 2 : 1;
        peer_free(&p);
        return rc;
    }
    /* names for messages: the rank, or in open membership the id */
    int N = p.is_open ? 1 : p.pl.n;
    char tag[32], who[48], pname[32];
    if (p.is_open) {
        snprintf(tag, sizeof tag, "%s", p.open.name);
        snprintf(who, sizeof who, "rumor-%s", p.open.name);
        snprintf(pname, sizeof pname, "%s", p.open.name);
    } else {
        snprintf(tag, sizeof tag, "peer %d", rank);
        snprintf(who, sizeof who, "rumor-peer %d/%d", rank, N);
        snprintf(pname, sizeof pname, "peer %d", rank);
    }
    snprintf(label, sizeof label, "rumor-%s", pname);
    rumor_log_set_tag(tag);
    const char *ckpt_swarm = p.is_open ? p.open.ckpt_swarm : opts.swarm;
    char spec[512];
    if (p.is_open)
        snprintf(spec, sizeof spec, "%s over the peers alive", opts.topology);
    else if (strchr(opts.topology, ':'))
        snprintf(spec, sizeof spec, "%s", opts.topology);
    else
        snprintf(spec, sizeof spec, "%s:%d", opts.topology, N);

    /* ---- device, data, model, optimizer: the trainer. Every peer starts
     * from the same model (the same seed) and runs the same rounds per
     * epoch: the full batches of the smallest shard (lockstep). Gossip
     * reads the parameters from host memory. */
    rumor_trainer_config_t tc;
    if (rumor_train_opts_config(&o, rank, N, &tc) < 0) { /* bad usage */
        fail(&p, NULL);
        return 2;
    }
    tc.lockstep = 1;
    tc.host_params = 1;
    /* open membership: no shards; each peer its own seeded stream over the
     * whole training set (its id picks the stream), so a peer that leaves
     * for good takes no data with it */
    if (p.is_open)
        tc.data_stream = p.open.id;
    /* --local-steps H: a round is H optimizer steps; the schedule and the
     * data count steps, the swarm counts rounds */
    long H = opts.local_steps;
    tc.steps = opts.rounds * H;
    tc.eval_batches = rumor_source_spec_kind(o.data, NULL) == RUMOR_BATCH_TOKENS ? 16 : 0;
    double t_load = rumor_now();
    if (rumor_trainer_create(&tc, &p.tr) < 0)
        return fail(&p, NULL);
    double t_loaded = rumor_now() - t_load;
    long per_epoch = p.tr->steps_per_epoch / H, total_rounds = p.tr->total_steps;
    if (per_epoch < 1)
        per_epoch = 1;
    if (H > 1) /* whole rounds: --rounds, or each epoch's */
        total_rounds = opts.rounds ? opts.rounds : per_epoch * o.epochs;
    size_t nparams = p.tr->model->nparams;
    /* every event names its peer: peers may share the file (progress.h) */
    char idhex[24];
    snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)p.open.id);
    if (o.metrics && (rumor_metrics_open(&p.metrics, o.metrics) < 0 ||
                      (p.is_open ? rumor_metrics_tag_str(&p.metrics, "peer", idhex)
                                 : rumor_metrics_tag_int(&p.metrics, "rank", rank)) < 0 ||
                      rumor_metrics_tag_str(&p.metrics, "swarm", opts.swarm) < 0))
        return fail(&p, "metrics");
    p.avg = malloc(nparams * sizeof(float));
    if (!p.avg) {
        rumor_err_set(RUMOR_ENOMEM, "out of memory");
        return fail(&p, "memory");
    }

    /* ---- resume from the newest checkpoint that loads */
    long first_round = 0;
    if (opts.checkpoint_dir) {
        char path[1024];
        /* only this swarm and rank's own checkpoints (see checkpoint.h);
         * open membership: this id's (its key's: a plaintext peer's id is
         * new in every life, and it fetches the swarm's state instead) */
        long round = 0;
        int lrc = rumor_trainer_resume_latest(p.tr, opts.checkpoint_dir, ckpt_swarm, rank, &round,
                                              path, sizeof path);
        if (lrc < 0)
            return fail(&p, "checkpoint");
        if (lrc == 0 && round >= total_rounds) {
            /* a finished run restarted (a service manager's restart, a
             * script run twice): nothing to do is not success */
            fprintf(stderr, "%s: %s is at round %ld, %s this run's last round %ld: nothing left "
                            "to train (give more --epochs or --rounds to go on from it)\n",
                    label, path, round, round == total_rounds ? "at" : "past", total_rounds);
            peer_free(&p);
            return 1;
        }
        if (lrc == 0) {
            first_round = round;
            /* stderr, even with -q: which file a run continues matters */
            fprintf(stderr, "%s: resumed from %s at round %ld\n", who, path, first_round);
        }
    }

    /* ---- --metrics-listen: the run's length, now that the data is loaded */
    p.snap.rounds_total = total_rounds;
    rumor_prom_publish(p.prom, &p.snap);

    /* ---- the swarm */
    int async = strcmp(opts.mode, "async") == 0;
    int dpsgd = strcmp(opts.mode, "dpsgd") == 0 || async;
    rumor_mixer_config_t mc = { 0 };
    mc.topo = p.topo;
    mc.self = rank;
    mc.endpoints = (const char *const *)p.pl.ep;
    mc.listen = opts.listen_ep;
    mc.swarm = rumor_wire_swarm_id(opts.swarm);
    mc.nparams = nparams;
    mc.chunk_elems = (size_t)(opts.chunk_mb * 1048576.0 / sizeof(float));
    if (opts.chunk_mb == 0) {
        /* 1 MiB cells: a cell's mixing reads it from the L2 cache; a model
         * of under 8 MiB gets 8 cells (at least 64 KiB each), so that
         * --send-ahead sends a round's first cells while its last arrive */
        mc.chunk_elems = RUMOR_MIXER_CHUNK;
        if (nparams / 8 < mc.chunk_elems)
            mc.chunk_elems = nparams / 8 > ((size_t)1 << 14) ? nparams / 8 : (size_t)1 << 14;
    }
    mc.max_msg_elems = (size_t)(opts.max_message_mb * 1048576.0 / sizeof(float));
    if (mc.max_msg_elems < 1)
        mc.max_msg_elems = 1;
    if (mc.chunk_elems < 1)
        mc.chunk_elems = 1;
    mc.round_timeout = opts.round_timeout;
    mc.min_round_timeout = opts.min_round_timeout;
    mc.async = async;
    char family[256] = "";
    const char *self_ep = p.open.advertise;
    if (p.is_open) { /* the swarm is whoever SWIM finds alive (mixer.h, max_peers) */
        mc.endpoints = &self_ep;
        mc.max_peers = opts.max_peers;
        mc.seeds = (const char *const *)p.open.join.ep;
        mc.nseeds = p.open.join.n;
        mc.seed_keys = p.open.key_of;
        mc.min_members = opts.min_peers > 0 ? opts.min_peers : 1;
        if (p.open.join.n && mc.min_members < 2)
            mc.min_members = 2; /* a joiner must reach someone */
        mc.ids = &p.open.id;
    }
    if (strcmp(opts.membership, "swim") == 0) {
        /* the family of the spec: "ring:8" -> "ring" */
        snprintf(family, sizeof family, "%s", opts.topology);
        if (!strchr(opts.topology, ':') || strncmp(opts.topology, "rreg:", 5) == 0)
            mc.membership = family;
        else {
            rumor_err_set(RUMOR_EINVAL, "--membership swim takes a topology family without a "
                                        "size ('ring', 'exp', 'torus', ...), not '%s'",
                          opts.topology);
            return fail(&p, "membership");
        }
    }
    mc.conns_per_peer = opts.connections;
    mc.io_threads = opts.io_threads;
    mc.keys = p.keys;
    mc.allow = p.allow;
    mc.peer_keys = (const uint8_t(*)[32])p.peer_keys;
    mc.staleness = opts.staleness;
    mc.dev = p.tr->dev; /* the mixing arithmetic runs on the trainer's device's ops */
    /* GPU stages copy their ranges to and from page-locked buffers */
    mc.host_mem = rumor_trainer_host_mem(p.tr);
    mc.first_round = first_round;
    if (rumor_codec_parse(opts.compress, &mc.codec) < 0) /* checked with the arguments */
        return fail(&p, "--compress");
    /* a sparse codec must send at least one element of a whole range */
    size_t cell = mc.chunk_elems < nparams ? mc.chunk_elems : nparams;
    if ((mc.codec.kind == RUMOR_CODEC_TOPK || mc.codec.kind == RUMOR_CODEC_RANDK) &&
        mc.codec.frac * (double)cell < 1.0) {
        fprintf(stderr, "rumor-peer: --compress %s sends %.3g elements of a range of %zu: give "
                        "a share of at least %.3g (one element a range)\n",
                opts.compress, mc.codec.frac * (double)cell, cell, 1.0 / (double)cell);
        peer_free(&p);
        return 2;
    }
    /* --compress with --mode allreduce: the gradients' all-reduce is coded
     * (the swarm average at the end stays f32) */
    int coded_allreduce = !dpsgd && mc.codec.kind != RUMOR_CODEC_NONE;
    /* --send-ahead: an unpipelined peer steps the mix cell by cell and
     * sends round k + 1's cells as they are stepped (a pipelined one steps
     * by stage); plain synchronous rounds on a list only (mixer.h), and
     * not with --local-steps: x(k+1) is what the local steps make of the
     * mix, known only at round_begin */
    int ahead = dpsgd && !async && !strcmp(opts.send_ahead, "yes") && !p.tr->pipe &&
                opts.local_steps == 1 &&
                mc.codec.kind == RUMOR_CODEC_NONE && !p.is_open && !mc.membership;
    if (ahead)
        rumor_trainer_set_step_ranges(p.tr, mc.chunk_elems, rumor_mixer_round_stepped);
    mc.consensus_step = opts.consensus_step;
    mc.keyframe_every = opts.keyframe_every;
    char terms[RUMOR_TERMS_MAX];
    if (build_terms(&opts, p.tr, &mc.codec, terms, sizeof terms) < 0)
        return fail(&p, "settings");
    mc.terms = terms;
    /* a neighbour 10x this peer's norm away diverged (mixer.h) */
    mc.outlier_ratio = 10;
    if (rumor_mixer_create(&mc, p.tr->stage->params, &p.mixer) < 0)
        return fail(&p, "swarm");
    hurry_mixer = p.mixer; /* a signal from now on leaves through the mixer */
    joining_started = 1;
    if (rumor_trainer_bind(p.tr, rumor_mixer_params(p.mixer)) < 0)
        return fail(&p, "model");
    /* a round's parameters go out once the GPU stages' copy of them landed
     * (it runs while the round's gradient is computed) */
    if (p.tr->pipe)
        rumor_mixer_set_params_ready(p.mixer, trainer_params_ready, p.tr);
    if (rumor_trainer_fills_cores(p.tr)) { /* no core to spare: mixing goes in the bubbles */
        rumor_mixer_set_caller_mixes(p.mixer, 1);
        rumor_info("the stages fill the %ld cores: each mixes its own range of a round in its "
                   "idle time", sysconf(_SC_NPROCESSORS_ONLN));
    }
    int nb = p.topo ? rumor_topo_neighbors(p.topo, rank, 0, NULL, NULL, 0) : 0;
    if (!o.quiet) {
        char secdesc[128];
        if (p.keys)
            snprintf(secdesc, sizeof secdesc, "CurveZMQ, %zu keys allowed",
                     rumor_allowlist_count(p.allow));
        else
            snprintf(secdesc, sizeof secdesc, "PLAINTEXT: --insecure");
        printf("%s: %s on %s, listening on %s (%s)\n", who,
               async ? "asynchronous D-PSGD" : dpsgd ? "D-PSGD" : "ring all-reduce",
               p.topo ? p.topo->desc : spec, rumor_mixer_endpoint(p.mixer), secdesc);
        if (p.is_open)
            printf("%s: open membership: id %016llx at %s, joining through %s\n", who,
                   (unsigned long long)p.open.id, p.open.advertise,
                   p.open.join.n ? opts.join : "nobody (a founder)");
        printf("%s: %s, %zu parameters (%.2f MB), %s; %d neighbour%s in round 0\n",
               who, p.tr->model->spec, nparams, nparams * 4.0 / 1e6, p.tr->dev->name, nb,
               nb == 1 ? "" : "s");
        rumor_trainer_describe_pipeline(p.tr, stdout, who);
        char span[64];
        if (opts.rounds)
            snprintf(span, sizeof span, "%ld rounds (--rounds)", total_rounds);
        else
            snprintf(span, sizeof span, "%d epoch%s", o.epochs, o.epochs == 1 ? "" : "s");
        if (p.tr->lm)
            printf("%s: %s (loaded in %.2f s), %ld rounds of %d windows of %d "
                   "tokens per epoch, %s\n",
                   who, rumor_source_describe(p.tr->src), t_loaded, per_epoch, o.batch,
                   p.tr->model->ctx, span);
        else
            printf("%s: %s of %ld examples (loaded in %.2f s), %ld rounds of "
                   "batch %d per epoch, %s\n",
                   who, p.is_open ? "its own stream over a training set" : "shard",
                   rumor_source_train_size(p.tr->src), t_loaded, per_epoch, o.batch, span);
        if (H > 1)
            printf("%s: local SGD: %ld optimizer steps a round, the parameters "
                   "gossiped once (--local-steps)\n", who, H);
        rumor_outer_config_t oc;
        if (opts.outer && rumor_outer_parse(opts.outer, &oc) == 0) {
            if (oc.kind == RUMOR_OUTER_NESTEROV)
                printf("%s: outer optimizer: Nesterov, lr %g, momentum %g, on each round's "
                       "change (DiLoCo; --outer)\n", who, oc.lr, oc.momentum);
            else
                printf("%s: outer optimizer: SGD, lr %g, on each round's change (DiLoCo; "
                       "--outer)\n", who, oc.lr);
        }
        if (coded_allreduce) {
            printf("%s: coded all-reduce: %s gradients, %.2fx smaller than f32\n",
                   who, opts.compress, rumor_codec_ratio(&mc.codec));
        } else if (mc.codec.kind != RUMOR_CODEC_NONE) {
            rumor_codec_t c = mc.codec;
            printf("%s: compressed gossip (CHOCO-SGD): %s, %.2fx smaller than "
                   "f32, consensus step %.3g, f32 keyframe every %d rounds\n",
                   who, opts.compress, rumor_codec_ratio(&c),
                   opts.consensus_step > 0 ? opts.consensus_step
                                           : rumor_codec_default_gamma(&c),
                   opts.keyframe_every > 0 ? opts.keyframe_every
                                           : rumor_codec_default_keyframe(&c));
        }
        fflush(stdout);
    }
    rumor_prom_set_phase(p.prom, RUMOR_PROM_WAITING);
    int ready = rumor_mixer_barrier(p.mixer, opts.start_timeout);
    if (ready < 0 && !leave_signal)
        return fail(&p, p.is_open ? "joining" : "swarm");
    if (leave_signal)
        return leave_before_training(&p, pname);
    if (p.is_open) {
        N = rumor_mixer_members(p.mixer);
        if (!o.quiet)
            printf("%s: joined a swarm of %d peer%s alive\n", who, N, N == 1 ? "" : "s");
    }
    rumor_metrics_write(&p.metrics,
                        "\"event\":\"start\",\"peers\":%d,\"mode\":\"%s\","
                        "\"topology\":\"%s\",\"model\":\"%s\",\"params\":%zu,\"rounds\":%ld,"
                        "\"ready\":%d,\"local_steps\":%ld",
                        N, opts.mode, spec, p.tr->model->spec, nparams, total_rounds, ready, H);

    /* ---- a late joiner or a restarted peer fetches the swarm's state */
    long k = first_round;
    float *params = rumor_mixer_params(p.mixer);
    long catch_ups = 0;
    /* open membership: a newcomer (nothing resumed) starts from the
     * swarm's parameters, fetched from its neighbours (catchup.h): here if
     * it knows the swarm's round already, or at its first round's end (the
     * neighbours' rounds may come just after its view) */
    int newcomer = p.is_open && first_round == 0;
    int joining = newcomer && dpsgd && !async;
    if (dpsgd && !async) { /* an asynchronous peer just follows the clock */
        long sr = rumor_mixer_swarm_round(p.mixer);
        if (rumor_catchup_at_start(opts.catch_up_rounds, newcomer, sr, k) ==
            RUMOR_CATCHUP_FETCH) {
            long nk;
            if (!o.quiet)
                printf("%s: the swarm is at round %ld: fetching its state\n", who, sr);
            if (rumor_mixer_catch_up(p.mixer, &nk, &params, opts.start_timeout) < 0) {
                if (leave_signal)
                    return leave_before_training(&p, pname);
                rumor_warn("catching up: %s; training from round %ld", rumor_err_msg(), k);
            } else {
                catch_ups++;
                k = nk < total_rounds ? nk : total_rounds;
                if (rumor_trainer_bind(p.tr, params) < 0)
                    return fail(&p, "model");
                /* a newcomer takes up the swarm's learning-rate schedule
                 * (and draws on in its own stream from there) */
                if (newcomer)
                    rumor_trainer_set_optim_steps(p.tr, k * H);
                joining = 0;
                if (!o.quiet)
                    printf("%s: joined at round %ld\n", who, k);
            }
        }
    }

    /* --outer: the anchor is where the first round starts */
    rumor_outer_t *outer = NULL;
    if (opts.outer) {
        rumor_outer_config_t ocfg;
        if (rumor_outer_parse(opts.outer, &ocfg) < 0) /* checked with the arguments */
            return fail(&p, "--outer");
        if (rumor_outer_create(&ocfg, p.tr->stage->params, nparams, &p.outer) < 0)
            return fail(&p, "--outer");
        outer = p.outer;
    }

    rumor_prom_set_phase(p.prom, RUMOR_PROM_TRAINING);
    /* ---- training: D-PSGD (Lian et al. 2017, Algorithm 1), its
     * asynchronous form, or all-reduce */
    rumor_progress_t prog;
    rumor_progress_begin(&prog, stdout, total_rounds, o.progress, o.quiet);
    double start = rumor_now(), wait_total = 0, acc = 0, tloss = 0, last_dis = 0;
    int gossip_row = 0; /* the trace's row for rounds, after the compute rows */
    if (o.trace) {
        if (rumor_trace_open(o.trace, start, &p.trace) < 0)
            return fail(&p, NULL);
        gossip_row = rumor_trainer_trace_rows(p.tr, p.trace);
        rumor_trace_row(p.trace, gossip_row, dpsgd ? "gossip" : "all-reduce");
    }
    char conns_json[512];
    double max_stall = 0, deadline = 0;
    long examples = 0, allreduce_failures = 0, rounds_run = 0;
    rumor_catchup_t cu; /* whether to jump or fetch when the swarm is ahead */
    rumor_catchup_init(&cu, opts.catch_up_rounds, rumor_now());
    rumor_round_stats_t st = { 0 };
    int leaving = 0, epoch = (int)(k / per_epoch) + 1;
    double epoch_start = rumor_now(), epoch_cpu0 = rumor_cpu_now(), loss_sum = 0, dis_sum = 0;
    long epoch_rounds = 0, evaluated_at = -1;
    int balancing = !strcmp(opts.balance, "batch");
    rumor_balance_t bal;
    rumor_balance_init(&bal, opts.balance_max);
    long draws = 0; /* --balance batch: batches drawn so far */
    while (k < total_rounds && !leaving) {
        if (leave_signal) {
            leaving = 1;
            break;
        }
        /* The batch of this peer's own step t (its optimizer's count, kept
         * in checkpoints): a resumed peer draws the batches it would have
         * drawn, and one that jumps rounds to follow the swarm skips no
         * data of its shard. */
        /* --local-steps: the round's first H - 1 steps on this peer's own
         * parameters, without gossip (with --outer all H: the gossip
         * then carries the round's result) */
        float loss = 0;
        for (long h = outer ? 0 : 1; h < H && !leave_signal; h++) {
            long tl = rumor_trainer_optim_steps(p.tr), ex;
            double c0 = rumor_now();
            if (rumor_trainer_grads_many(p.tr, tl, 1, &loss, &ex) < 0)
                return fail(&p, NULL);
            if (opts.throttle > 1)
                sleep_unless_leaving((opts.throttle - 1) * (rumor_now() - c0));
            if (rumor_trainer_update(p.tr, NULL) < 0)
                return fail(&p, "optimizer step");
            examples += ex;
        }
        long t = rumor_trainer_optim_steps(p.tr);
        rumor_batch_t batch;
        if (rumor_trainer_batch(p.tr, t, &batch) < 0)
            return fail(&p, "data");
        long bs = batch.n;
        /* --balance batch: this round's batches, drawn on from the last
         * round's (a balanced peer walks its shard at its own pace) */
        int nbat = balancing ? rumor_balance_batches(&bal) : 1;
        if (balancing && draws < t)
            draws = t;
        if (outer)
            bs = 0; /* counted by the local steps */
        long next = k + 1;
        /* for the trace: the round's start, the gradient's, its end, the
         * mix's end */
        double t_round = rumor_now(), t_compute = t_round, t_computed = t_round, t_mixed;
        int stepped = 0; /* the optimizer step is done (rumor_trainer_grads_step) */
        if (dpsgd) {
            /* send x(k) while computing the gradient at x(k); then
             * x(k+1) = sum_j W_ij x_j(k) - lr * step(grad) */
            if (rumor_mixer_round_begin(p.mixer, k) < 0)
                return fail(&p, "round");
            t_compute = rumor_now();
            /* a pipelined peer with one batch and no outer step: each stage
             * steps on its own range of the mix as soon as both are ready,
             * while the other stages still compute (--throttle, which
             * sleeps after the whole gradient, keeps the round's order) */
            stepped = (p.tr->pipe || ahead) && !outer && !balancing && opts.throttle <= 1;
            rumor_mixer_round_t rn = { p.mixer, k };
            if (stepped ? rumor_trainer_grads_step(p.tr, &batch, t, &loss, rumor_mixer_round_range,
                                                   &rn) < 0
                        : !outer && (balancing
                                         ? rumor_trainer_grads_many(p.tr, draws, nbat, &loss, &bs)
                                         : rumor_trainer_grads(p.tr, &batch, t, &loss)) < 0)
                return fail(&p, NULL);
            if (opts.throttle > 1 && !outer)
                sleep_unless_leaving((opts.throttle - 1) * (rumor_now() - t_compute));
            t_computed = rumor_now();
            float *mixed;
            if (rumor_mixer_round_end(p.mixer, k, &mixed, &st) < 0)
                return fail(&p, "round");
            if (outer) /* the mix becomes the outer step's target: x = the new anchor */
                rumor_outer_step(outer, mixed);
            if (!stepped && rumor_trainer_bind(p.tr, mixed) < 0) /* after every change to it */
                return fail(&p, "model");
            if (stepped) /* the wait for the mix came inside the step */
                st.wait_s += p.tr->wait_s;
            wait_total += st.wait_s;
            last_dis = st.disagreement;
            dis_sum += st.disagreement;
            deadline = st.deadline_s;
            if (!async && st.deadline_s > 0 && st.round_s / st.deadline_s > max_stall)
                max_stall = st.round_s / st.deadline_s;
            next = st.next_round;
            if (balancing) {
                rumor_balance_observe(&bal, nbat, t_computed - t_compute, st.wait_s);
                draws += nbat;
            }
        } else {
            if (rumor_trainer_grads(p.tr, &batch, t, &loss) < 0)
                return fail(&p, NULL);
            double t0 = t_computed = rumor_now();
            float *g = rumor_trainer_flat_grads(p.tr);
            if (!g)
                return fail(&p, "gradient");
            if (rumor_mixer_allreduce_mean(p.mixer, g, nparams, k,
                                           opts.round_timeout, coded_allreduce) < 0) {
                /* A missing peer stops the ring: this round steps on the
                 * local gradient instead (C-PSGD has no better answer). */
                allreduce_failures++;
                rumor_warn("round %ld: %s; stepping on the local gradient", k, rumor_err_msg());
                if (rumor_trainer_grads(p.tr, &batch, t, &loss) < 0)
                    return fail(&p, NULL);
            }
            wait_total += rumor_now() - t0;
        }
        t_mixed = rumor_now();
        if (!outer && !stepped && rumor_trainer_update(p.tr, NULL) < 0)
            return fail(&p, "optimizer step");
        if (p.trace) {
            char args[128], name[32];
            rumor_trainer_trace(p.tr, p.trace, t, t_compute, t_computed, t_mixed, rumor_now());
            snprintf(args, sizeof args, "\"round\":%ld,\"step\":%ld,\"wait_s\":%.6f", k, t,
                     dpsgd ? st.wait_s : t_mixed - t_computed);
            snprintf(name, sizeof name, "round %ld", k);
            rumor_trace_span(p.trace, gossip_row, name, "round", t_round, t_mixed, args);
            rumor_trace_span(p.trace, gossip_row, dpsgd ? "wait and mix" : "all-reduce",
                             "wait", t_computed, t_mixed, args);
            if (dpsgd && st.mix_end > 0) /* the comm thread mixing the cells that came */
                rumor_trace_span(p.trace, gossip_row, "mixing", "gossip", st.mix_start,
                                 st.mix_end, args);
            if (dpsgd && st.recv_end > 0) /* the round's ranges arriving, ahead ones too */
                rumor_trace_span(p.trace, gossip_row, "receiving", "network", st.recv_start,
                                 st.recv_end, args);
            if (k % 16 == 15)
                rumor_trace_flush(p.trace); /* a killed peer leaves a readable prefix */
        }
        loss_sum += loss;
        examples += bs;
        rounds_run++;
        epoch_rounds++;
        /* Behind the swarm (frozen, cut off, restarted): jump ahead keeping
         * this peer's parameters, or fetch the swarm's state (catchup.h). */
        long target;
        rumor_catchup_action act = rumor_catchup_after_round(&cu, &st, next, rumor_now(), &target);
        if (dpsgd && !async && !leave_signal && act != RUMOR_CATCHUP_NONE) {
            int fetched = 0;
            /* the GPU stages' copy of this round's parameters lands first */
            if (rumor_trainer_sync_params(p.tr) < 0)
                return fail(&p, "model");
            if (act == RUMOR_CATCHUP_FETCH) {
                long nk;
                rumor_info("the swarm is at round %ld, this peer at %ld: fetching its state",
                           target, next);
                if (rumor_mixer_catch_up(p.mixer, &nk, &params, opts.round_timeout + 5) < 0) {
                    rumor_warn("catching up: %s; skipping ahead instead", rumor_err_msg());
                } else {
                    catch_ups++;
                    fetched = 1;
                    if (rumor_trainer_bind(p.tr, params) < 0)
                        return fail(&p, "model");
                    if (outer)
                        rumor_outer_reset(outer, params);
                    next = nk;
                    if (joining) { /* a newcomer's first fetch, as at the start */
                        rumor_trainer_set_optim_steps(p.tr, next * H);
                        joining = 0;
                        if (!o.quiet)
                            printf("%s: joined at round %ld\n", who, next);
                    }
                }
            }
            if (!fetched) {
                if (rumor_mixer_jump(p.mixer, target) < 0)
                    return fail(&p, "round");
                next = target;
            }
        }
        joining = 0; /* a newcomer not behind after its first round mixed in */
        if (next > total_rounds)
            next = total_rounds;
        long done_round = next;
        if (opts.checkpoint_dir && opts.checkpoint_every > 0 &&
            done_round / opts.checkpoint_every > k / opts.checkpoint_every && !leave_signal &&
            save_checkpoint(&p, &opts, done_round) < 0) {
            /* counted and said (save_checkpoint) */
        }
        k = next;
        rumor_mixer_traffic(p.mixer, &st.bytes_sent, &st.bytes_received);
        double el = rumor_now() - start;
        char bub[64] = "";
        if (p.tr->pipe) /* the measured idle share of the pipeline's devices */
            snprintf(bub, sizeof bub, "  bubble %.0f%%", 100.0 * p.tr->bubble);
        if (balancing) /* the batches the next round takes */
            snprintf(bub + strlen(bub), sizeof bub - strlen(bub), "  batches %d",
                     rumor_balance_batches(&bal));
        if (rumor_progress_update(
                &prog, k, 0,
                "round %ld/%ld  epoch %d  loss %.4f  %.0f ex/s  |mix-x| %.3g  sent %.1f MB  "
                "recv %.1f MB  waiting %.0f%%%s",
                k, total_rounds, epoch, (double)loss, examples / el, last_dis,
                st.bytes_sent / 1e6, st.bytes_received / 1e6, 100.0 * wait_total / el, bub))
            rumor_metrics_write(&p.metrics,
                                "\"event\":\"round\",\"round\":%ld,\"epoch\":%d,\"loss\":%.6g,"
                                "\"examples_per_s\":%.1f,\"consensus\":%.6g,\"bytes_sent\":%llu,"
                                "\"bytes_received\":%llu,\"wait_s\":%.3f,\"deadline_s\":%.3f,"
                                "\"members\":%d,\"in_neighbors\":%d,\"complete\":%d,"
                                "\"rejected\":%llu,\"connections\":%s,\"bubble\":%.4f,"
                                "\"batches\":%d,\"round_wait_s\":%.4f,\"timed_out\":%d",
                                k, epoch, (double)loss, examples / el, last_dis,
                                (unsigned long long)st.bytes_sent,
                                (unsigned long long)st.bytes_received, wait_total, deadline,
                                st.members, st.in_neighbors, st.complete,
                                (unsigned long long)live_rejected(p.mixer),
                                live_connections(p.mixer, conns_json, sizeof conns_json),
                                p.tr->pipe ? p.tr->bubble : 0.0,
                                balancing ? rumor_balance_batches(&bal) : 1,
                                dpsgd ? st.wait_s : 0.0, dpsgd ? st.timed_out : 0);
        if (p.prom) { /* the snapshot Prometheus scrapes */
            rumor_prom_snapshot_t *s = &p.snap;
            rumor_mixer_counters_t mcn;
            rumor_mixer_counters(p.mixer, &mcn);
            s->round = k;
            s->loss = loss;
            s->examples_per_second = el > 0 ? examples / el : 0;
            s->wait_seconds = wait_total;
            s->seconds = el;
            s->consensus_distance = last_dis;
            s->in_neighbors = st.in_neighbors;
            s->neighbors_complete = st.complete;
            s->members = st.members;
            s->bytes_sent = st.bytes_sent;
            s->bytes_received = st.bytes_received;
            s->rounds_run = (uint64_t)rounds_run;
            s->rounds_mixed = mcn.rounds_mixed;
            s->consensus_skipped = mcn.consensus_skipped;
            s->jumps = mcn.jumps;
            s->state_fetches = (uint64_t)catch_ups;
            rumor_mixer_wire_stats(p.mixer, &s->messages);
            rumor_prom_publish(p.prom, s);
        }
        /* ---- the end of an epoch (or of several, after a jump) */
        if (k / per_epoch + 1 <= epoch && k < total_rounds)
            continue;
        double epoch_s = rumor_now() - epoch_start, epoch_cpu = rumor_cpu_now() - epoch_cpu0;
        int evaluated = epoch % opts.eval_every == 0 || k >= total_rounds;
        if (evaluated && evaluate(&p, NULL, &acc, &tloss) < 0)
            return fail(&p, "evaluation");
        if (evaluated) {
            evaluated_at = k;
            p.snap.eval_loss = tloss;
            if (!p.tr->lm)
                p.snap.test_accuracy = acc;
            rumor_prom_publish(p.prom, &p.snap);
        }
        double nr = epoch_rounds > 0 ? (double)epoch_rounds : 1.0;
        if (!o.quiet) {
            char accs[64] = "";
            if (evaluated && p.tr->lm)
                snprintf(accs, sizeof accs, "  validation loss %.4f", tloss);
            else if (evaluated)
                snprintf(accs, sizeof accs, "  test accuracy %.2f%%", 100.0 * acc);
            rumor_progress_print(&prog, "epoch %d/%d  train loss %.4f%s  |mix-x| %.3g  %.1f s",
                                 epoch, (int)((total_rounds + per_epoch - 1) / per_epoch),
                                 loss_sum / nr, accs,
                                 dpsgd ? dis_sum / nr : 0.0, epoch_s);
        }
        char acc_field[48] = ""; /* a classifier's; a language model has none */
        if (!p.tr->lm)
            snprintf(acc_field, sizeof acc_field, "\"test_accuracy\":%.6f,",
                     evaluated ? acc : -1.0);
        rumor_metrics_write(&p.metrics,
                            "\"event\":\"epoch\",\"epoch\":%d,\"round\":%ld,\"train_loss\":%.6g,"
                            "%s\"eval_loss\":%.6g,\"consensus\":%.6g,"
                            "\"seconds\":%.3f,\"epoch_seconds\":%.3f,\"epoch_cpu_seconds\":%.3f",
                            epoch, k, loss_sum / nr, acc_field,
                            evaluated ? tloss : -1.0,
                            dpsgd ? dis_sum / nr : 0.0, rumor_now() - start, epoch_s, epoch_cpu);
        epoch = (int)(k / per_epoch) + 1;
        if (opts.checkpoint_dir && save_checkpoint(&p, &opts, k) < 0) {
            /* counted and said (save_checkpoint) */
        }
        epoch_start = rumor_now();
        epoch_cpu0 = rumor_cpu_now();
        loss_sum = dis_sum = 0;
        epoch_rounds = 0;
    }
    double seconds = rumor_now() - start;
    rumor_prom_set_phase(p.prom, leaving ? RUMOR_PROM_LEAVING : RUMOR_PROM_DONE);
    if (rumor_trainer_sync_params(p.tr) < 0) /* the last round's copy from the GPU stages */
        return fail(&p, "model");
    /* a peer that caught up at the very end trained no epoch to its end */
    if (!leaving && evaluated_at != k && evaluate(&p, NULL, &acc, &tloss) < 0)
        return fail(&p, "evaluation");

    /* ---- preempted: checkpoint, tell the neighbours, exit 0 */
    if (leaving) {
        int crc = opts.checkpoint_dir ? save_checkpoint(&p, &opts, k) : 0;
        if (crc < 0)
            fprintf(stderr, "%s: checkpoint while leaving: %s\n", label, rumor_err_msg());
        printf("%s: left at round %ld on signal %d after %.1f s%s%s\n", pname, k,
               (int)leave_signal, seconds, opts.checkpoint_dir && crc == 0 ? "; checkpoint in " : "",
               opts.checkpoint_dir && crc == 0 ? opts.checkpoint_dir : "");
        rumor_metrics_write(&p.metrics, "\"event\":\"leave\",\"round\":%ld,"
                                        "\"signal\":%d,\"checkpoint\":%s",
                            k, (int)leave_signal, crc == 0 && opts.checkpoint_dir ? "true" : "false");
        peer_free(&p); /* flushes queued chunks, then LEAVE */
        return crc < 0 ? 1 : 0;
    }

    /* ---- a peer that trained alone although it has neighbours: say so */
    rumor_mixer_counters_t mcn;
    rumor_mixer_counters(p.mixer, &mcn);
    int alone = (N > 1 || p.is_open) && rounds_run > 0 && mcn.rounds_mixed == 0 &&
                !opts.allow_alone;

    /* ---- the swarm's average model: all-reduce of the parameters */
    double avg_acc = -1, avg_loss = 0;
    int avg_lost = 0; /* --save-average could not be written there */
    char avg_note[300] = "";
    int avg_members = N;
    if (!opts.no_average && !alone) {
        /* with membership: over the peers alive, tried again over the
         * survivors if one dies during it; a fixed list: every rank */
        int tries = strcmp(opts.membership, "swim") == 0 ? 3 : 1;
        if (rumor_peer_average(p.mixer, p.tr->stage->params, p.avg, nparams, total_rounds,
                               fmax(opts.round_timeout, 10.0), tries) < 0)
            snprintf(avg_note, sizeof avg_note, "unavailable: %s%s", rumor_err_msg(),
                     tries > 1 ? ""
                               : " (a fixed list averages over every rank; with --membership "
                                 "swim it is over the peers alive)");
        else if (evaluate(&p, p.avg, &avg_acc, &avg_loss) < 0)
            return fail(&p, "evaluation");
        if (tries > 1 && !avg_note[0])
            avg_members = rumor_mixer_allreduce_size(p.mixer);
        if (!avg_note[0] && opts.save_average)
            avg_lost = save_average(&p, &opts, ckpt_swarm, rank, total_rounds, pname);
    }
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(p.mixer, &ws);
    char rejects[512], conns[256], conns_j[512];
    rumor_wire_stats_format(&ws, rejects, sizeof rejects);
    rumor_transport_stats_t ts;
    rumor_mixer_transport_stats(p.mixer, &ts);
    if (rumor_transport_stats_format(&ts, p.keys != NULL, conns, sizeof conns) < 0)
        snprintf(conns, sizeof conns, "?");
    if (rumor_transport_stats_json(&ts, conns_j, sizeof conns_j) < 0)
        snprintf(conns_j, sizeof conns_j, "{}");
    if (p.tr->lm) {
        printf("%s: local validation loss %.4f\n", pname, tloss);
        if (!avg_note[0] && !opts.no_average && !alone)
            printf("%s: swarm average validation loss %.4f\n", pname, avg_loss);
    } else {
        printf("%s: local test accuracy %.2f%%\n", pname, 100.0 * acc);
    }
    if (avg_acc >= 0 && p.is_open)
        printf("%s: swarm average test accuracy %.2f%% (%d peers alive)\n", pname,
               100.0 * avg_acc, avg_members);
    else if (avg_acc >= 0)
        printf("%s: swarm average test accuracy %.2f%%\n", pname, 100.0 * avg_acc);
    else if (!opts.no_average && !alone && avg_note[0])
        printf("%s: swarm average %s\n", pname, avg_note);
    char ckpts[96] = "";
    if (p.ckpt_failed)
        snprintf(ckpts, sizeof ckpts, "; CHECKPOINTS FAILED: %ld of %ld", p.ckpt_failed,
                 p.ckpt_tried);
    printf("%s: done: %ld rounds (%ld run here) in %.1f s, %.0f examples/s, sent %.1f MB, "
           "received %.1f MB, waited %.1f s; messages: %s; connections: %s%s%s\n",
           pname, total_rounds, rounds_run, seconds, examples / seconds, st.bytes_sent / 1e6,
           st.bytes_received / 1e6, wait_total, rejects, conns,
           allreduce_failures ? " (some all-reduces failed)" : "", ckpts);
    if (mcn.elems_ahead) /* --send-ahead */
        printf("%s: sent ahead: %.1f%% of the parameters sent went before their round began\n",
               pname, 100.0 * (double)mcn.elems_ahead / (double)mcn.elems_sent);
    if (mcn.jumps || catch_ups || mcn.state_served)
        printf("%s: caught up: %llu jumps over %llu rounds, %ld state fetches; served state "
               "%llu times\n",
               pname, (unsigned long long)mcn.jumps, (unsigned long long)mcn.rounds_skipped,
               catch_ups, (unsigned long long)mcn.state_served);
    char wsj[2048];
    if (rumor_wire_stats_json(&ws, wsj, sizeof wsj) < 0)
        snprintf(wsj, sizeof wsj, "{}");
    char accs_field[96] = ""; /* a classifier's; a language model has none */
    if (!p.tr->lm)
        snprintf(accs_field, sizeof accs_field, "\"local_accuracy\":%.6f,\"average_accuracy\":%.6f,",
                 acc, avg_acc);
    rumor_metrics_write(&p.metrics,
                        "\"event\":\"done\",%s\"local_eval_loss\":%.6g,"
                        "\"average_eval_loss\":%.6g,\"seconds\":%.3f,\"rounds\":%ld,"
                        "\"rounds_run\":%ld,\"examples_per_s\":%.1f,"
                        "\"bytes_sent\":%llu,\"bytes_received\":%llu,\"wait_s\":%.3f,"
                        "\"rejected\":%llu,\"allreduce_failures\":%ld,\"max_stall\":%.3f,"
                        "\"jumps\":%llu,\"rounds_skipped\":%llu,\"catch_ups\":%ld,"
                        "\"state_served\":%llu,\"digest_failures\":%llu,\"stale_applied\":%llu,"
                        "\"endpoints_learned\":%llu,\"rounds_mixed\":%llu,\"alone\":%s,"
                        "\"consensus_skipped\":%llu,\"compress\":\"%s\","
                        "\"elems_sent\":%llu,\"elems_ahead\":%llu,"
                        "\"members\":%d,\"members_joined\":%llu,\"not_allowed\":%llu,"
                        "\"checkpoints\":%ld,\"checkpoints_failed\":%ld,"
                        "\"outlier_rounds\":%llu,\"incompatible_neighbours\":%d,"
                        "\"messages\":%s,\"connections\":%s",
                        accs_field, tloss, avg_note[0] || opts.no_average || alone ? -1.0 : avg_loss,
                        seconds, total_rounds, rounds_run, examples / seconds,
                        (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_received,
                        wait_total, (unsigned long long)rumor_wire_stats_rejected(&ws),
                        allreduce_failures, max_stall, (unsigned long long)mcn.jumps,
                        (unsigned long long)mcn.rounds_skipped, catch_ups,
                        (unsigned long long)mcn.state_served,
                        (unsigned long long)mcn.digest_failures,
                        (unsigned long long)mcn.stale_applied,
                        (unsigned long long)mcn.endpoints_learned,
                        (unsigned long long)mcn.rounds_mixed, alone ? "true" : "false",
                        (unsigned long long)mcn.consensus_skipped, opts.compress,
                        (unsigned long long)mcn.elems_sent, (unsigned long long)mcn.elems_ahead,
                        avg_members,
                        (unsigned long long)mcn.members_joined,
                        (unsigned long long)mcn.not_allowed, p.ckpt_tried, p.ckpt_failed,
                        (unsigned long long)mcn.outlier_rounds, mcn.incompatible, wsj,
                        conns_j);
    peer_free(&p);
    if (p.ckpt_failed) {
        fprintf(stderr, "%s: %ld of %ld checkpoints failed to write (the last at %s): this run "
                        "was not protected by them\n", label, p.ckpt_failed, p.ckpt_tried,
                p.ckpt_err);
        return 1;
    }
    if (avg_lost)
        return 1;
    if (alone) {
        fprintf(stderr,
                "%s: trained alone: no neighbour's parameters reached this peer in "
                "%ld rounds (messages: %s; connections: %s). Check --peers, the keys and "
                "--allow, and that the neighbours run; --allow-alone accepts training alone\n",
                label, rounds_run, rejects, conns);
        return 1;
    }
    return 0;
}
