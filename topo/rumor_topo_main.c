/* rumor-topo: generate, weight and analyze gossip topologies.
 *
 *   rumor-topo analyze SPEC [options]      one report (text, --json, --dot, --svg)
 *   rumor-topo compare SPEC SPEC ...       side by side
 *   rumor-topo recommend --peers N --model-bytes B [--links F] [--max-degree K]
 *   rumor-topo weights SPEC -o FILE        export W for rumor-peer
 *
 * Exit status (the rule of every rumor binary): 0 success; 1 a file that
 * cannot be read or is invalid (file: specs and weights, --links) or a
 * failed analysis; 2 bad usage, all that the command line decides before
 * any work: options, SPECs and values that do not parse or do not go
 * together, an output file that cannot be written. The message says what
 * and where. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blas_tune.h"
#include "log.h"
#include "report.h"

#define EXIT_INPUT 1
#define EXIT_USAGE 2

static const char SPEC_HELP[] =
    "TOPOLOGY SPECS\n"
    "  ring:N               cycle of N peers (N >= 2)\n"
    "  torus:RxC            2-D torus, R x C peers (R, C >= 2)\n"
    "  grid:RxC             2-D grid without wrap-around\n"
    "  hypercube:D          2^D peers, i ~ i xor 2^k (1 <= D <= 20)\n"
    "  exp:N                static exponential graph, undirected: i ~ i +- 2^k mod N\n"
    "  exp:N:directed       the same as published by Ying et al. (2021): i receives from\n"
    "                       i + 2^k mod N, weights 1/(1+ceil(log2 N)) (fixed)\n"
    "  onepeer-exp:N        one-peer exponential graph (time-varying): at round k peer i\n"
    "                       averages with i + 2^(k mod tau); exact after tau = log2 N rounds\n"
    "                       when N is a power of two\n"
    "  complete:N           every pair\n"
    "  star:N               peer 0 linked to every other\n"
    "  rreg:N:D[:seed=S]    random D-regular graph (seeded, connected)\n"
    "  er:N:P[:seed=S]      Erdos-Renyi G(N, P) (seeded, connected)\n"
    "  ws:N:K:P[:seed=S]    Watts-Strogatz small world: ring lattice of degree K (even),\n"
    "                       rewired with probability P (seeded, connected)\n"
    "  base:N:K             Base-(K+1) graph (Takezawa et al. 2023): time-varying, at most K\n"
    "                       messages a peer a round, exact averaging after one period, any N\n"
    "  file:PATH            edge list ('i j' or 'i j w' lines, '#' comments, optional\n"
    "                       'n N' line) or JSON ({\"n\":N,\"edges\":[[i,j],[i,j,w],...]} or\n"
    "                       networkx node-link); weights on edges become W\n"
    "  Seeds default to 1; N is at most 1048576. The same spec means the same graph and\n"
    "  weights in rumor-peer.\n";

static const char WEIGHTS_HELP[] =
    "WEIGHTS (--weights)\n"
    "  mh           Metropolis-Hastings: W_ij = 1/(1+max(d_i,d_j)), W_ii = 1 - sum (default)\n"
    "  maxdeg       W_ij = 1/(1+d_max)\n"
    "  uniform      W_ij = 1/(1+d) (regular graphs only)\n"
    "  bestconst    best constant edge weight (Xiao & Boyd 2004); self-weights may be < 0\n"
    "  fmmc         fastest mixing Markov chain (Boyd, Diaconis & Xiao 2004), projected\n"
    "               subgradient from mh; never worse than mh\n"
    "  file:PATH    a weights file as written by 'rumor-topo weights'\n"
    "  Time-varying specs (onepeer-exp, base, exp:N:directed) carry their own weights.\n";

static const char ANALYZE_HELP[] =
    "NAME\n"
    "  rumor-topo analyze - spectral gap, mixing rate and cost of one topology\n\n"
    "SYNOPSIS\n"
    "  rumor-topo analyze SPEC [--weights W] [--model-bytes N] [--links FILE] [--eps E]\n"
    "                     [--method M] [--time-limit S] [--sim-rounds R | --no-sim]\n"
    "                     [--json | --dot] [--svg FILE]\n\n"
    "DESCRIPTION\n"
    "  Builds the topology SPEC with its mixing matrix W and reports the graph (peers,\n"
    "  links, degrees), the spectrum (lambda_2, lambda_n, rho = max(|lambda_2|,\n"
    "  |lambda_n|), spectral gap 1 - rho; for time-varying or non-symmetric W, the\n"
    "  contraction of one period's product), the rounds to eps-consensus\n"
    "  (log(1/eps)/log(1/rho)), a consensus simulation from a random vector (measured\n"
    "  against predicted decay) and, given a model size, the bytes per round and the\n"
    "  predicted time per round and to eps-consensus on a described network.\n\n"
    "OPTIONS\n"
    "  -w, --weights W      mixing weights (see WEIGHTS); default mh\n"
    "  -b, --model-bytes N  model size in bytes (units: K, M, G, KiB, MiB, GiB, ...);\n"
    "                       enables the traffic and time sections\n"
    "  -l, --links FILE     the network: bandwidth and latency per link or per site\n"
    "                       (see LINK FILE); default 10 Gbit/s links and NICs, 50 us\n"
    "  -e, --eps E          consensus target, 0 < E < 1 (default 1e-6)\n"
    "  -m, --method M       auto: the closed form when W has a symmetry group (ring,\n"
    "                       torus, hypercube, complete, exp, onepeer-exp with weights\n"
    "                       that treat all peers alike; a grid with one weight on every\n"
    "                       link), else dense up to 2048 peers, then lanczos; or dense,\n"
    "                       lanczos (ours, thick-restart), arpack\n"
    "  -t, --time-limit S   stop an iterative solve (lanczos, arpack) after S seconds,\n"
    "                       print what is known so far (bounds on lambda_2, lambda_n and\n"
    "                       rho) and exit with status 1; default 60, 0 = no limit. Solves\n"
    "                       that take more than a second report progress on stderr\n"
    "      --sim-rounds R   simulate at most R rounds (default: rounds to eps, <= 1000)\n"
    "      --no-sim         skip the simulation\n"
    "  -j, --json           print a JSON object instead of the report (fields: spec, n,\n"
    "                       edges, degree_min, degree_max, method, lambda2, lambda_min,\n"
    "                       rho, spectral_gap, rounds_to_eps, rounds_to_1e-6, exact_after,\n"
    "                       simulation{...}, cost{...}); method is e.g. \"closed-form\n"
    "                       (circulant)\", \"dense (LAPACK dsyevd)\", \"sparse (Lanczos)\"\n"
    "  -d, --dot            print the graph in graphviz format (weights as labels)\n"
    "  -s, --svg FILE       draw the graph, the spectrum and the consensus decay\n"
    "  -h, --help           this help\n\n"
    "GOSSIP PLAN (with --model-bytes)\n"
    "      --compress CODEC compressed gossip (rumor-peer --compress): none, int8,\n"
    "                       int4, int2, topk:F[:bits=B[:chunk=C]] or randk:F; messages\n"
    "                       carry the codec's share of the model (f32 keyframes one\n"
    "                       round in R), and consensus runs at max |1 - gamma (1 -\n"
    "                       lambda)| a round (default none)\n"
    "      --consensus-step G  CHOCO's gamma in (0, 1] (default: the codec's)\n"
    "      --keyframe-every R  rounds between f32 keyframes (default: the codec's)\n"
    "      --local-steps H  optimizer steps a round (rumor-peer --local-steps): a round\n"
    "                       takes (H - 1) compute + max(communication, compute), with the\n"
    "                       link file's compute time per step (default 1)\n"
    "      --fragments F    streaming outer steps (rumor-peer --fragments): a round is\n"
    "                       H / F steps and carries 1/F of the model, and a coordinate\n"
    "                       mixes once in F rounds (default 1)\n"
    "      --overlap S      S of a streamed round's steps run while its fragment is in\n"
    "                       flight: the round takes (H/F - S) compute + max(communication,\n"
    "                       S compute) (default 0)\n\n"
    "LINK FILE\n"
    "  default BW LAT            every pair not described otherwise\n"
    "  nic PEERS BW              NIC of those peers, shared by their links (else unlimited)\n"
    "  site NAME PEERS           a group of peers (machine, rack, region)\n"
    "  intra NAME BW LAT         links inside a site\n"
    "  inter NAME NAME BW LAT    links between two sites\n"
    "  link I J BW LAT           one pair; wins over the rest\n"
    "  compute TIME              local compute per optimizer step (overlaps communication)\n"
    "  PEERS: all | 0-15,32,40-47; BW: 10Gbit, 100Mbit, 1.25GB (bytes), optional /s;\n"
    "  LAT/TIME: 800ns, 50us, 2ms, 0.1s. '#' starts a comment.\n\n"
    "EXAMPLES\n"
    "  rumor-topo analyze ring:16\n"
    "  rumor-topo analyze torus:1024x1024          (closed form: about a second)\n"
    "  rumor-topo analyze rreg:200000:4 --time-limit 300\n"
    "  rumor-topo analyze torus:8x8 --weights fmmc --json\n"
    "  rumor-topo analyze exp:1024 --model-bytes 100MB --links cluster.links\n"
    "  rumor-topo analyze base:24:2 --svg base24.svg\n"
    "  rumor-topo analyze file:edges.txt --dot | dot -Tpng > g.png\n\n"
    "EXIT STATUS\n"
    "  0 success; 1 a file that cannot be read or is invalid (file: specs and\n"
    "  weights, --links) or a failed analysis; 2 bad usage (options, SPECs and\n"
    "  values that do not parse or do not go together, an output that cannot be\n"
    "  written).\n";

static const char COMPARE_HELP[] =
    "NAME\n"
    "  rumor-topo compare - several topologies side by side\n\n"
    "SYNOPSIS\n"
    "  rumor-topo compare SPEC SPEC ... [--weights W] [--model-bytes N] [--links FILE]\n"
    "                     [--eps E] [--method M] [--time-limit S] [--json]\n\n"
    "DESCRIPTION\n"
    "  Analyzes each SPEC (as 'analyze' does, without the simulation) and prints one row\n"
    "  each: peers, links, degree range, rho, spectral gap, rounds to eps and, with\n"
    "  --model-bytes, the bytes each peer sends per round, time per round and time to\n"
    "  eps. --weights applies to every static SPEC. --json prints an array of the\n"
    "  objects 'analyze --json' prints.\n\n"
    "OPTIONS\n"
    "  -w, --weights W, -b, --model-bytes N, -l, --links FILE, -e, --eps E,\n"
    "  -m, --method M, -t, --time-limit S, -j, --json, --compress CODEC,\n"
    "  --consensus-step G, --keyframe-every R, --local-steps H, -h, --help: as for\n"
    "  analyze.\n\n"
    "EXAMPLES\n"
    "  rumor-topo compare ring:64 torus:8x8 hypercube:6 exp:64 onepeer-exp:64 base:64:3\n"
    "  rumor-topo compare rreg:1024:4 exp:1024 --model-bytes 25MB --json\n\n"
    "EXIT STATUS\n"
    "  0 success; 1 a file that cannot be read or is invalid (file: specs and\n"
    "  weights, --links) or a failed analysis; 2 bad usage (options, SPECs and\n"
    "  values that do not parse or do not go together, an output that cannot be\n"
    "  written).\n";

static const char RECOMMEND_HELP[] =
    "NAME\n"
    "  rumor-topo recommend - rank topologies by predicted time to consensus\n\n"
    "SYNOPSIS\n"
    "  rumor-topo recommend --peers N --model-bytes B [--links FILE] [--max-degree K]\n"
    "                       [--compress LIST] [--local-steps H] [--fragments F]\n"
    "                       [--overlap S] [--eps E] [--method M] [--time-limit S] [--json]\n\n"
    "DESCRIPTION\n"
    "  Builds the candidate topologies for N peers (ring, torus, hypercube, exp,\n"
    "  exp:directed, onepeer-exp, base:N:1..4, rreg:N:3,4,6,8, complete, star),\n"
    "  prices each with every codec of LIST (default none,int8,int4,topk:0.1: the\n"
    "  bytes a round and CHOCO's consensus rate with the codec's consensus step),\n"
    "  predicts the rounds to eps-consensus and the time per round on the network,\n"
    "  and ranks the (topology, codec) pairs by predicted time to eps, saying why.\n"
    "  When the link file gives a compute time, each row also says the local steps\n"
    "  H that hide its communication behind compute (rumor-peer --local-steps H:\n"
    "  more only slow consensus) and the time per optimizer step with them, and\n"
    "  the best one's streamed form (--fragments H --overlap 1: a step sends 1/H of\n"
    "  the model while it computes, the largest message H times smaller).\n"
    "  Candidates that send more than K messages a peer a round, or do not exist\n"
    "  for N, are listed apart with the reason.\n\n"
    "OPTIONS\n"
    "  -n, --peers N        number of peers (required)\n"
    "  -b, --model-bytes B  model size (required)\n"
    "  -l, --links FILE     the network (see 'rumor-topo analyze --help')\n"
    "  -k, --max-degree K   at most K messages per peer per round\n"
    "      --compress LIST  the codecs to consider, comma-separated (default\n"
    "                       none,int8,int4,topk:0.1); --consensus-step G and\n"
    "                       --keyframe-every R apply to each\n"
    "      --local-steps H  price every row with H local steps instead of suggesting H\n"
    "      --fragments F, --overlap S  price every row streamed (as for analyze)\n"
    "  -e, --eps E, -m, --method M, -t, --time-limit S (per candidate), -j, --json,\n"
    "  -h, --help: as for analyze.\n\n"
    "EXAMPLES\n"
    "  rumor-topo recommend --peers 64 --model-bytes 100MB\n"
    "  rumor-topo recommend --peers 48 --model-bytes 1.2GB --links two-racks.links -k 4\n\n"
    "EXIT STATUS\n"
    "  0 success; 1 a file that cannot be read or is invalid (file: specs and\n"
    "  weights, --links) or a failed analysis; 2 bad usage (options, SPECs and\n"
    "  values that do not parse or do not go together, an output that cannot be\n"
    "  written).\n";

static const char WEIGHTSCMD_HELP[] =
    "NAME\n"
    "  rumor-topo weights - export the mixing matrix for rumor-peer\n\n"
    "SYNOPSIS\n"
    "  rumor-topo weights SPEC [--weights W] -o FILE\n\n"
    "DESCRIPTION\n"
    "  Writes W (every round's W for a time-varying SPEC) as a weights file:\n"
    "    rumor-weights 1 n=N period=P\n"
    "    round K           (before each round's entries when P > 1)\n"
    "    i j w             W_ij with %.17g; every non-zero, diagonal included\n"
    "  '#' starts a comment. Peer i mixes x_i <- sum_j W_ij x_j, so the lines starting\n"
    "  with i are all that peer i needs. The file reads back exactly ('--weights\n"
    "  file:FILE', rumor-peer's --weights file:FILE) and is checked: rows and columns\n"
    "  summing to 1, non-zeros on the graph's links; negative entries (bestconst's\n"
    "  self-weights) only in a symmetric W with rho(W - 11^T/n) < 1, so that mixing\n"
    "  with it still converges.\n\n"
    "OPTIONS\n"
    "  -o, --output FILE    where to write ('-' for standard output); required\n"
    "  -w, --weights W      as for analyze (default mh)\n"
    "  -h, --help           this help\n\n"
    "EXAMPLES\n"
    "  rumor-topo weights torus:4x4 --weights fmmc -o torus.w\n"
    "  rumor-topo weights star:10 --weights bestconst -o star.w   (W_00 = -7/11)\n"
    "  rumor-topo analyze torus:4x4 --weights file:torus.w\n\n"
    "EXIT STATUS\n"
    "  0 success; 1 a file that cannot be read or is invalid (file: specs and\n"
    "  weights, --links) or a failed analysis; 2 bad usage (options, SPECs and\n"
    "  values that do not parse or do not go together, an output that cannot be\n"
    "  written).\n";

static void usage(FILE *f)
{
    fprintf(f,
            "NAME\n"
            "  rumor-topo - generate, weight and analyze gossip topologies for D-PSGD\n\n"
            "SYNOPSIS\n"
            "  rumor-topo analyze SPEC [options]\n"
            "  rumor-topo compare SPEC SPEC ... [options]\n"
            "  rumor-topo recommend --peers N --model-bytes B [--links FILE] [--max-degree K]\n"
            "  rumor-topo weights SPEC [--weights W] -o FILE\n"
            "  rumor-topo COMMAND --help\n\n"
            "DESCRIPTION\n"
            "  D-PSGD converges at a rate set by the mixing matrix W of its topology: the\n"
            "  closer rho = max(|lambda_2|, |lambda_n|) is to 1, the longer peers take to\n"
            "  agree, while denser graphs cost more bytes a round. rumor-topo computes both\n"
            "  and predicts time to consensus on a described network.\n\n"
            "%s\n%s\n"
            "EXIT STATUS\n"
            "  0 success; 1 a file that cannot be read or is invalid (file: specs and\n"
            "  weights, --links) or a failed analysis; 2 bad usage (options, SPECs and\n"
            "  values that do not parse or do not go together, an output that cannot be\n"
            "  written).\n\n"
            "SEE ALSO\n"
            "  rumor-topo(1), docs/rumor-topo.md\n",
            SPEC_HELP, WEIGHTS_HELP);
}

/* Options shared by analyze, compare and recommend. */
typedef struct {
    const char *weights, *links, *svg, *out, *compress;
    rumor_gossip_plan_t plan; /* --compress (one codec), --consensus-step, ... */
    double model_bytes, eps, time_limit; /* time_limit: library convention (< 0 = none) */
    rumor_eig_method method;
    int json, dot, sim_rounds, peers, max_degree;
} opts_t;

static int fail(void)
{
    fprintf(stderr, "rumor-topo: %s\n", rumor_err_msg());
    return EXIT_INPUT;
}

/* The last error, which the command line's own text caused: exit 2. */
static int fail_usage(void)
{
    fprintf(stderr, "rumor-topo: %s\n", rumor_err_msg());
    return EXIT_USAGE;
}

/* Whether a SPEC or --weights reads a file (file:PATH): what goes wrong
 * then is the file's (exit 1), else the command line's (exit 2). */
static int names_file(const char *s)
{
    return s && strstr(s, "file:") != NULL;
}

static int bad_usage(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "rumor-topo %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'rumor-topo %s --help'.\n", cmd);
    return EXIT_USAGE;
}

/* An output file named on the command line (- is standard output): its
 * directory must be there and writable, and it must not be a directory;
 * checked before any work, so that a long analysis is not lost. Returns -1
 * when it can be written, else the exit status (2). */
static int check_output(const char *cmd, const char *opt, const char *path)
{
    if (!strcmp(path, "-"))
        return -1;
    char dir[4096], why[4200];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *up = !slash ? "." : slash == dir ? "/" : (*slash = '\0', dir);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(why, sizeof why, "%s %s: is a directory", opt, path);
    else if (stat(up, &sb) < 0)
        snprintf(why, sizeof why, "%s %s: there is no directory %s", opt, path, up);
    else if (!S_ISDIR(sb.st_mode))
        snprintf(why, sizeof why, "%s %s: %s is not a directory", opt, path, up);
    else if (access(up, W_OK | X_OK) < 0 || (access(path, F_OK) == 0 && access(path, W_OK) < 0))
        snprintf(why, sizeof why, "%s %s: cannot be written", opt, path);
    else
        return -1;
    return bad_usage(cmd, "%s", why);
}

/* recommend's --compress list: each codec must parse (the library checks
 * it again; here it is the command line's). */
static int check_codec_list(const char *cmd, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        rumor_codec_t c;
        if (rumor_codec_parse(tok, &c) < 0)
            return bad_usage(cmd, "--compress: %s", rumor_err_msg());
    }
    return -1;
}

/* Parses argv for `cmd`; returns -1 to go on, else an exit status. */
static int parse_opts(const char *cmd, const char *help, int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        { "weights", required_argument, 0, 'w' }, { "model-bytes", required_argument, 0, 'b' },
        { "links", required_argument, 0, 'l' },   { "eps", required_argument, 0, 'e' },
        { "method", required_argument, 0, 'm' },  { "json", no_argument, 0, 'j' },
        { "dot", no_argument, 0, 'd' },           { "svg", required_argument, 0, 's' },
        { "sim-rounds", required_argument, 0, 'R' }, { "no-sim", no_argument, 0, 'N' },
        { "peers", required_argument, 0, 'n' },   { "max-degree", required_argument, 0, 'k' },
        { "output", required_argument, 0, 'o' },  { "help", no_argument, 0, 'h' },
        { "time-limit", required_argument, 0, 't' },
        { "compress", required_argument, 0, 'C' }, { "consensus-step", required_argument, 0, 'G' },
        { "keyframe-every", required_argument, 0, 'K' },
        { "local-steps", required_argument, 0, 'H' },
        { "fragments", required_argument, 0, 'F' }, { "overlap", required_argument, 0, 'S' },
        { 0, 0, 0, 0 }
    };
    memset(o, 0, sizeof *o);
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, ":w:b:l:e:m:jds:n:k:o:t:h", lo, NULL)) != -1) {
        switch (c) {
        case 'w': o->weights = optarg; break;
        case 'l': o->links = optarg; break;
        case 's': o->svg = optarg; break;
        case 'o': o->out = optarg; break;
        case 'j': o->json = 1; break;
        case 'd': o->dot = 1; break;
        case 'N': o->sim_rounds = -1; break;
        case 'C':
            o->compress = optarg;
            /* recommend takes a list; the others one codec */
            if (!strcmp(cmd, "recommend")) {
                int rc = check_codec_list(cmd, optarg);
                if (rc >= 0)
                    return rc;
            } else if (rumor_codec_parse(optarg, &o->plan.codec) < 0) {
                return bad_usage(cmd, "--compress: %s", rumor_err_msg());
            }
            break;
        case 'G':
            o->plan.gamma = strtod(optarg, &end);
            if (*end || !(o->plan.gamma > 0 && o->plan.gamma <= 1))
                return bad_usage(cmd, "--consensus-step '%s': expected a number in (0, 1]",
                                 optarg);
            break;
        case 'K':
            o->plan.keyframe_every = (int)strtol(optarg, &end, 10);
            if (*end || o->plan.keyframe_every < 1 || o->plan.keyframe_every > 100000)
                return bad_usage(cmd, "--keyframe-every '%s': expected 1 to 100000", optarg);
            break;
        case 'H':
            o->plan.local_steps = (int)strtol(optarg, &end, 10);
            if (*end || o->plan.local_steps < 1 || o->plan.local_steps > 10000)
                return bad_usage(cmd, "--local-steps '%s': expected 1 to 10000", optarg);
            break;
        case 'F':
            o->plan.fragments = (int)strtol(optarg, &end, 10);
            if (*end || o->plan.fragments < 1 || o->plan.fragments > 4096)
                return bad_usage(cmd, "--fragments '%s': expected 1 to 4096", optarg);
            break;
        case 'S':
            o->plan.overlap = (int)strtol(optarg, &end, 10);
            if (*end || o->plan.overlap < 0 || o->plan.overlap > 10000)
                return bad_usage(cmd, "--overlap '%s': expected 0 to 10000 steps", optarg);
            break;
        case 'h': fputs(help, stdout); return 0;
        case 'b':
            if (rumor_topo_parse_bytes(optarg, &o->model_bytes) < 0)
                return bad_usage(cmd, "--model-bytes: %s", rumor_err_msg());
            break;
        case 'e':
            o->eps = strtod(optarg, &end);
            if (*end || !(o->eps > 0 && o->eps < 1))
                return bad_usage(cmd, "--eps '%s': expected a number in (0, 1)", optarg);
            break;
        case 'm':
            if (rumor_eig_parse_method(optarg, &o->method) < 0)
                return bad_usage(cmd, "--method: %s", rumor_err_msg());
            break;
        case 't':
            o->time_limit = strtod(optarg, &end);
            if (*end || !(o->time_limit >= 0 && o->time_limit <= 1e9))
                return bad_usage(cmd, "--time-limit '%s': expected seconds (0 = no limit)",
                                 optarg);
            if (o->time_limit == 0)
                o->time_limit = -1;
            break;
        case 'R':
            o->sim_rounds = (int)strtol(optarg, &end, 10);
            if (*end || o->sim_rounds < 1 || o->sim_rounds > 1000000)
                return bad_usage(cmd, "--sim-rounds '%s': expected 1 to 1000000", optarg);
            break;
        case 'n':
            o->peers = (int)strtol(optarg, &end, 10);
            if (*end || o->peers < 2 || o->peers > RUMOR_TOPO_MAX_NODES)
                return bad_usage(cmd, "--peers '%s': expected 2 to 1048576", optarg);
            break;
        case 'k':
            o->max_degree = (int)strtol(optarg, &end, 10);
            if (*end || o->max_degree < 1)
                return bad_usage(cmd, "--max-degree '%s': expected a positive integer", optarg);
            break;
        case ':': return bad_usage(cmd, "option '%s' needs a value", argv[optind - 1]);
        default: return bad_usage(cmd, "unknown option '%s'", argv[optind - 1]);
        }
    }
    int H = o->plan.local_steps > 1 ? o->plan.local_steps : 1;
    int F = o->plan.fragments > 1 ? o->plan.fragments : 1;
    char why[160];
    if (H % F) {
        snprintf(why, sizeof why, "--fragments %d: --local-steps %d is not a multiple of it", F,
                 H);
        return bad_usage(cmd, "%s", why);
    }
    if (o->plan.overlap > H / F) {
        snprintf(why, sizeof why, "--overlap %d: at most H / F = %d steps", o->plan.overlap,
                 H / F);
        return bad_usage(cmd, "%s", why);
    }
    if (o->links && !(o->model_bytes > 0) && strcmp(cmd, "weights"))
        return bad_usage(cmd, "--links needs --model-bytes (time per round depends on it)%s", "");
    return -1;
}

/* Where a long iterative solve stands, on stderr (arg: the command). */
static void progress(void *arg, const rumor_eig_progress_t *p)
{
    fprintf(stderr, "rumor-topo: %s: %s: %.0f s, %ld operator products",
            p->what ? p->what : (const char *)arg, p->method, p->seconds, p->matvecs);
    if (!isnan(p->lmax) && p->squared)
        fprintf(stderr, ", contraction >= %.10f so far", sqrt(p->lmax > 0 ? p->lmax : 0));
    else if (!isnan(p->lmax))
        fprintf(stderr, ", lambda_2 >= %.10f, lambda_n <= %.10f so far", p->lmax, p->lmin);
    if (isfinite(p->rmax) && isfinite(p->rmin))
        fprintf(stderr, " (residuals %.1e, %.1e; target %.0e)", p->rmax, p->rmin, p->tol);
    fputc('\n', stderr);
}

/* A SPEC with --weights applied, or the exit status (the message said):
 * 2 when the command line's text is at fault (a SPEC that does not parse,
 * weights that do not exist or do not fit the graph), 1 when a file is. */
static int topo_of(const char *spec, const char *weights, rumor_topo_t **t)
{
    *t = NULL;
    if (rumor_topo_parse(spec, t) < 0)
        return names_file(spec) ? fail() : fail_usage();
    if (weights) {
        int rc = rumor_topo_set_weights(*t, weights);
        if (rc < 0) {
            rumor_topo_destroy(t);
            return names_file(spec) || names_file(weights) || rc != RUMOR_EINVAL ? fail()
                                                                               : fail_usage();
        }
    }
    return 0;
}

/* Parses a spec, applies --weights, analyzes and prices it: 0, or the exit
 * status after saying why. */
static int make_result(const char *spec, const opts_t *o, int sim, rumor_topo_result_t *r)
{
    rumor_topo_t *t = NULL;
    int status = topo_of(spec, o->weights, &t);
    if (status)
        return status;
    rumor_links_t *links = NULL;
    char network[160] = "";
    if (o->links) {
        if (rumor_links_load(o->links, t->n, &links) < 0) {
            rumor_topo_destroy(&t);
            return fail();
        }
        snprintf(network, sizeof network, "links from %.140s", o->links);
    }
    rumor_analyze_opts_t ao = { .method = o->method, .eps = o->eps,
                                .sim_rounds = sim ? o->sim_rounds : -1,
                                .time_limit = o->time_limit, .progress = progress,
                                .progress_arg = (void *)"analyze" };
    int rc = rumor_topo_result_make(t, &ao, o->model_bytes, links, network, &o->plan, r);
    rumor_links_destroy(&links);
    if (rc < 0) {
        rumor_topo_result_free(r);
        return fail();
    }
    return 0;
}

static int cmd_analyze(int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts("analyze", ANALYZE_HELP, argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return bad_usage("analyze", optind >= argc ? "expected a SPEC%s" : "expected one SPEC, got '%s' too",
                         optind >= argc ? "" : argv[optind + 1]);
    if (o.json && o.dot)
        return bad_usage("analyze", "--json and --dot exclude each other%s", "");
    if (o.svg && (rc = check_output("analyze", "--svg", o.svg)) >= 0)
        return rc;
    rumor_topo_result_t r;
    if ((rc = make_result(argv[optind], &o, !o.dot, &r)) != 0)
        return rc;
    rc = 0;
    if (o.svg && rumor_topo_write_svg(o.svg, &r) < 0)
        rc = fail();
    if (o.dot)
        rumor_topo_print_dot(stdout, r.topo);
    else if (o.json) {
        if (rumor_topo_print_json(stdout, &r, 1, 0) < 0)
            rc = fail();
    } else
        rumor_topo_print_report(stdout, &r);
    rumor_topo_result_free(&r);
    return rc;
}

static int cmd_compare(int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts("compare", COMPARE_HELP, argc, argv, &o);
    if (rc >= 0)
        return rc;
    int count = argc - optind;
    if (count < 1)
        return bad_usage("compare", "expected one or more SPECs%s", "");
    if (o.dot || o.svg)
        return bad_usage("compare", "--dot and --svg belong to 'analyze'%s", "");
    rumor_topo_result_t *r = calloc((size_t)count, sizeof *r);
    if (!r)
        return fail();
    rc = 0;
    int done = 0;
    for (; done < count; done++)
        if ((rc = make_result(argv[optind + done], &o, 0, &r[done])) != 0)
            break;
    if (!rc) {
        if (o.json) {
            if (rumor_topo_print_json(stdout, r, count, 1) < 0)
                rc = fail();
        } else
            rumor_topo_print_compare(stdout, r, count);
    }
    for (int i = 0; i < done; i++)
        rumor_topo_result_free(&r[i]);
    free(r);
    return rc;
}

static int cmd_recommend(int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts("recommend", RECOMMEND_HELP, argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (optind != argc)
        return bad_usage("recommend", "unexpected argument '%s'", argv[optind]);
    if (!o.peers || !(o.model_bytes > 0))
        return bad_usage("recommend", "--peers and --model-bytes are required%s", "");
    rumor_recommend_opts_t ro = { .peers = o.peers, .model_bytes = o.model_bytes,
                                  .links_path = o.links, .max_degree = o.max_degree,
                                  .eps = o.eps, .method = o.method,
                                  .time_limit = o.time_limit, .progress = progress,
                                  .progress_arg = (void *)"recommend",
                                  .codecs = o.compress, .plan = o.plan };
    rumor_topo_result_t *r = NULL;
    int count = 0;
    if (rumor_topo_recommend(&ro, &r, &count) < 0)
        return fail();
    if (o.json) {
        if (rumor_topo_print_json(stdout, r, count, 1) < 0)
            rc = fail();
        else
            rc = 0;
    } else {
        rumor_topo_print_recommend(stdout, &ro, r, count);
        rc = 0;
    }
    for (int i = 0; i < count; i++)
        rumor_topo_result_free(&r[i]);
    free(r);
    return rc;
}

static int cmd_weights(int argc, char **argv)
{
    opts_t o;
    int rc = parse_opts("weights", WEIGHTSCMD_HELP, argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return bad_usage("weights", "expected one SPEC%s", "");
    if (!o.out)
        return bad_usage("weights", "-o FILE is required%s", "");
    if ((rc = check_output("weights", "-o", o.out)) >= 0)
        return rc;
    rumor_topo_t *t = NULL;
    if ((rc = topo_of(argv[optind], o.weights, &t)) != 0)
        return rc;
    char comment[256];
    snprintf(comment, sizeof comment, "rumor-topo weights %.160s --weights %s", t->spec,
             rumor_mix_scheme_name(t->scheme));
    if (!strcmp(o.out, "-"))
        rc = rumor_mix_write(stdout, t->w, t->period, comment);
    else
        rc = rumor_mix_save(o.out, t->w, t->period, comment);
    rumor_topo_destroy(&t);
    return rc < 0 ? fail() : 0;
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        if (argc > 2 && strcmp(cmd, "help") == 0) { /* "help analyze" */
            static char prog[] = "rumor-topo", flag[] = "--help";
            static char *sub[4];
            sub[0] = prog, sub[1] = argv[2], sub[2] = flag, sub[3] = NULL;
            argv = sub;
            argc = 3;
            cmd = sub[1];
        } else {
            usage(stdout);
            return 0;
        }
    }
    if (!strcmp(cmd, "--version")) {
        printf("rumor-topo %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "analyze"))
        return cmd_analyze(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare"))
        return cmd_compare(argc - 1, argv + 1);
    if (!strcmp(cmd, "recommend"))
        return cmd_recommend(argc - 1, argv + 1);
    if (!strcmp(cmd, "weights"))
        return cmd_weights(argc - 1, argv + 1);
    fprintf(stderr, "rumor-topo: unknown command '%s' (expected analyze, compare, recommend or "
                    "weights)\nTry 'rumor-topo --help'.\n",
            cmd);
    return EXIT_USAGE;
}
