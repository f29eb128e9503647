/* rumor-sim: simulates an open swarm's membership (gossip/swim.h) with
 * hundreds to thousands of peers on one machine. main parses the options
 * and calls the engine (sim.h); docs/sim.md says what is simulated. */
#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"
#include "log.h"
#include "options.h"
#include "sim.h"
#include "swim.h"
#include "topology.h"

struct opts {
    int peers;
    double join_over, duration;
    double latency, jitter, loss, rate;
    const char *net;
    double kill_rate;
    const char *lifetime;
    double leave_share, kill_at;
    const char *burst;
    int observers, max_members;
    double sample, progress, wall_limit;
    long seed;
    int json, quiet;
    const char *svg;
    int rounds, dim;
    const char *topology;
    double model, cpu_ms, cores, round_timeout, min_round_timeout, drift, heartbeat_timeout;
    double grace, init_spread, target;
};

#define O(f) offsetof(struct opts, f)
static const rumor_opt_t table[] = {
    { "peers", 'n', RUMOR_OPT_INT, O(peers), 1, 100000, NULL, 0 },
    { "join-over", 0, RUMOR_OPT_DOUBLE, O(join_over), 0, 86400, NULL, 0 },
    { "duration", 'd', RUMOR_OPT_DOUBLE, O(duration), 0, 86400, NULL, 0 },
    { "latency", 0, RUMOR_OPT_DOUBLE, O(latency), 0, 10000, NULL, 0 },
    { "jitter", 0, RUMOR_OPT_DOUBLE, O(jitter), 0, 10000, NULL, 0 },
    { "loss", 0, RUMOR_OPT_DOUBLE, O(loss), 0, 1, NULL, 0 },
    { "rate-mbit", 0, RUMOR_OPT_DOUBLE, O(rate), 0, 1e6, NULL, 0 },
    { "net", 0, RUMOR_OPT_PATH, O(net), 0, 0, NULL, 0 },
    { "kill-rate", 0, RUMOR_OPT_DOUBLE, O(kill_rate), 0, 1, NULL, 0 },
    { "lifetime", 0, RUMOR_OPT_STR, O(lifetime), 0, 0, NULL, 0 },
    { "leave-share", 0, RUMOR_OPT_DOUBLE, O(leave_share), 0, 1, NULL, 0 },
    { "kill-at", 0, RUMOR_OPT_DOUBLE, O(kill_at), -1, 1e6, NULL, 0 },
    { "burst", 0, RUMOR_OPT_STR, O(burst), 0, 0, NULL, 0 },
    { "observers", 0, RUMOR_OPT_INT, O(observers), 0, 100000, NULL, 0 },
    { "max-members", 0, RUMOR_OPT_INT, O(max_members), 0, 65536, NULL, 0 },
    { "sample", 0, RUMOR_OPT_DOUBLE, O(sample), 0.01, 3600, NULL, 0 },
    { "progress", 0, RUMOR_OPT_DOUBLE, O(progress), 0, 3600, NULL, 0 },
    { "wall-limit", 0, RUMOR_OPT_DOUBLE, O(wall_limit), 0, 1e7, NULL, 0 },
    { "seed", 's', RUMOR_OPT_LONG, O(seed), 0, 9007199254740991.0, NULL, 0 },
    { "json", 0, RUMOR_OPT_FLAG, O(json), 0, 0, NULL, 1 },
    { "svg", 0, RUMOR_OPT_PATH, O(svg), 0, 0, NULL, 0 },
    { "quiet", 'q', RUMOR_OPT_FLAG, O(quiet), 0, 0, NULL, 1 },
    { "rounds", 0, RUMOR_OPT_FLAG, O(rounds), 0, 0, NULL, 1 },
    { "topology", 0, RUMOR_OPT_STR, O(topology), 0, 0, NULL, 0 },
    { "model-params", 0, RUMOR_OPT_DOUBLE, O(model), 0, 1e12, NULL, 0 },
    { "round-cpu-ms", 0, RUMOR_OPT_DOUBLE, O(cpu_ms), 0.001, 1e7, NULL, 0 },
    { "cores", 0, RUMOR_OPT_DOUBLE, O(cores), 0, 1e6, NULL, 0 },
    { "round-timeout", 0, RUMOR_OPT_DOUBLE, O(round_timeout), 0.001, 86400, NULL, 0 },
    { "min-round-timeout", 0, RUMOR_OPT_DOUBLE, O(min_round_timeout), 0.001, 86400, NULL, 0 },
    { "drift", 0, RUMOR_OPT_DOUBLE, O(drift), 0, 1e12, NULL, 0 },
    { "heartbeat-timeout", 0, RUMOR_OPT_DOUBLE, O(heartbeat_timeout), 0.001, 3600, NULL, 0 },
    { "new-edge-grace", 0, RUMOR_OPT_DOUBLE, O(grace), 0, 3600, NULL, 0 },
    { "init-spread", 0, RUMOR_OPT_DOUBLE, O(init_spread), 0, 1e12, NULL, 0 },
    { "target", 0, RUMOR_OPT_DOUBLE, O(target), 0, 1e12, NULL, 0 },
    { "dim", 0, RUMOR_OPT_INT, O(dim), 1, 64, NULL, 0 },
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

static const char usage[] =
    "Usage: rumor-sim [OPTION]...\n"
    "Simulate the membership of a rumor open swarm: every simulated peer runs\n"
    "librumor's own SWIM (gossip/swim.h) with rumor-peer's settings, over a\n"
    "simulated network, with churn; print detection, join, traffic, view and\n"
    "memory figures. With --rounds every peer also runs D-PSGD rounds over the\n"
    "graph its view implies (librumor's topology and deadline rule): rounds a\n"
    "second, waits, deadlines and consensus distance.\n"
    "\n"
    "Swarm and churn:\n"
    "  -n, --peers N          initial peers, 1 to 100000 (default 100)\n"
    "  --join-over S          they start evenly over S seconds, each from one\n"
    "                         random live peer (default 10; 0 to 86400)\n"
    "  -d, --duration S       seconds simulated after that (default 60; 0 to 86400)\n"
    "  --kill-rate F          fraction of --peers killed a minute, each replaced by\n"
    "                         a newcomer at once (default 0.1; 0 to 1)\n"
    "  --lifetime exp:MEAN    instead, exponential lifetimes of MEAN seconds (spot\n"
    "                         instances), each death replaced (default: off)\n"
    "  --leave-share P        share of departures that leave in order\n"
    "                         (rumor_swim_leave) instead of dying silently\n"
    "                         (default 0; 0 to 1)\n"
    "  --burst T:K            kill K random peers together at T seconds and start\n"
    "                         K newcomers (bench_scale's churn; default: none)\n"
    "  --kill-at T            also kill one random peer at T seconds of simulated\n"
    "                         time, not replaced (default -1: none)\n"
    "\n"
    "Network (one-way; a message costs its body plus the 80-byte header):\n"
    "  --latency MS           mean latency in ms (default 25; 0 to 10000)\n"
    "  --jitter MS            uniform +- MS on every message (default 5; 0 to 10000)\n"
    "  --loss P               probability a message is lost (default 0; 0 to 1)\n"
    "  --rate-mbit R          each peer's upload rate in Mbit/s; a peer sends one\n"
    "                         message at a time (default 100; 0 = unlimited)\n"
    "  --net FILE             per-peer links instead: lines 'UP_MBIT DOWN_MBIT\n"
    "                         LATENCY_MS', one drawn per peer; a message takes\n"
    "                         the mean of its two ends' latencies ('#' comments)\n"
    "\n"
    "Training rounds (--rounds; docs/sim.md, \"Rounds\"):\n"
    "  --rounds               simulate D-PSGD rounds as well (default: off)\n"
    "  --topology SPEC        family laid over each peer's view, as rumor-peer's\n"
    "                         --topology (default exp)\n"
    "  --model-params N       parameters; a PARAMS message carries 4 bytes each\n"
    "                         plus the header (default 12730: mlp:784-16-10)\n"
    "  --round-cpu-ms MS      CPU a round's compute takes on a core of its own\n"
    "                         (default 100; 0.001 to 1e7)\n"
    "  --cores C              cores all peers share: with more live peers than C a\n"
    "                         round's compute takes live/C times longer (default 0:\n"
    "                         a core each)\n"
    "  --round-timeout S      a round's longest deadline (default 10, rumor-peer's)\n"
    "  --min-round-timeout S  its shortest (default 0.5, rumor-peer's)\n"
    "  --heartbeat-timeout S  silence after which a neighbour is not waited for\n"
    "                         (default 2, rumor-peer's; a what-if for the mixer)\n"
    "  --new-edge-grace S     an in-neighbour of a static graph that became one less\n"
    "                         than S s ago is mixed if its PARAMS come, not waited\n"
    "                         for (default 0: rumor-peer's rule; a what-if)\n"
    "  --drift D              norm of each peer's own step a round, its SGD step\n"
    "                         (default 1: consensus in units of the step)\n"
    "  --dim D                entries of the simulated parameters, 1 to 64\n"
    "                         (default 16)\n"
    "  --init-spread S        the initial peers start from random parameters of norm\n"
    "                         S (default 0: all equal; newcomers fetch a member's)\n"
    "  --target X             report when the distance to the peers' average first\n"
    "                         falls below X after the joins (time to consensus;\n"
    "                         sampled every --sample s)\n"
    "\n"
    "Measurement and output:\n"
    "  --observers K          watch about K peers' tables for the 50%/100% figures\n"
    "                         (default 1000; 0 = all peers)\n"
    "  --max-members M        SWIM's table bound, 2 to 65536 (default 0: swim.h's\n"
    "                         4096, as rumor-peer); memory per peer grows with it\n"
    "  --sample S             simulated seconds between points of the curve\n"
    "                         (default 1; 0.01 to 3600)\n"
    "  --json                 print one JSON object instead of the table\n"
    "  --svg FILE             also plot live peers, view coverage, departures and\n"
    "                         detections over simulated time\n"
    "  --progress S           a progress line to stderr every S wall seconds\n"
    "                         (default 5; 0 = none)\n"
    "  --wall-limit S         stop after S seconds of wall time and report the\n"
    "                         simulated time reached (default 0: no limit);\n"
    "                         SIGINT and SIGTERM stop a run the same way\n"
    "  -q, --quiet            no progress lines\n"
    "  -s, --seed N           random seed: equal seeds, equal runs (default 1)\n"
    "  -c, --config FILE      read options from an INI file first ('key = value',\n"
    "                         keys named like the long options)\n"
    "  -h, --help             show this help and exit\n"
    "  -V, --version          show the version and exit\n"
    "\n"
    "Examples:\n"
    "  rumor-sim --peers 1000 --duration 120\n"
    "  rumor-sim --peers 200 --lifetime exp:600 --loss 0.01 --json\n"
    "  rumor-sim --peers 128 --rounds --round-cpu-ms 2 --cores 2 --latency 0.05\n"
    "\n"
    "Exit status: 0 on success, 1 on a runtime error, 2 on bad usage.\n";

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "rumor-sim: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'rumor-sim --help' for more information.\n");
    return 2;
}

int sim_links_read(const char *path, sim_link_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return rumor_err_sys(RUMOR_EIO, "%s", path);
    char line[512];
    int lineno = 0, cap = 0, rc = 0;
    sim_link_t *a = NULL;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        sim_link_t l;
        char extra;
        int k = sscanf(line, "%lf %lf %lf %c", &l.up_mbit, &l.down_mbit, &l.latency_ms, &extra);
        if (k == EOF || (k <= 0 && strspn(line, " \t\r\n") == strlen(line)))
            continue;
        if (k != 3 || !(l.up_mbit > 0 && l.up_mbit <= 1e6) ||
            !(l.down_mbit > 0 && l.down_mbit <= 1e6) ||
            !(l.latency_ms >= 0 && l.latency_ms <= 1e4)) {
            rc = rumor_err_set(RUMOR_EFORMAT,
                               "%s:%d: expected 'UP_MBIT DOWN_MBIT LATENCY_MS' (rates in "
                               "(0, 1e6], latency in [0, 10000])", path, lineno);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            sim_link_t *b = realloc(a, (size_t)cap * sizeof *b);
            if (!b) {
                rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
                break;
            }
            a = b;
        }
        a[(*n)++] = l;
    }
    fclose(f);
    if (rc == 0 && *n == 0)
        rc = rumor_err_set(RUMOR_EFORMAT, "%s: no links", path);
    if (rc < 0) {
        free(a);
        *n = 0;
        return rc;
    }
    *out = a;
    return 0;
}

/* An output file's directory must exist before hours of simulation. */
static int writable_dir(const char *path)
{
    char *copy = strdup(path);
    struct stat st;
    int ok = copy && stat(dirname(copy), &st) == 0 && S_ISDIR(st.st_mode);
    free(copy);
    return ok;
}

int main(int argc, char **argv)
{
    struct opts o = { .peers = 100, .join_over = 10, .duration = 60, .latency = 25,
                      .jitter = 5, .rate = 100, .kill_rate = 0.1, .kill_at = -1,
                      .observers = 1000, .sample = 1, .progress = 5, .seed = 1,
                      .topology = "exp", .model = 12730, .cpu_ms = 100, .round_timeout = 10,
                      .min_round_timeout = 0.5, .drift = 1, .dim = 16,
                      .heartbeat_timeout = 2 };
    switch (rumor_opts_parse("rumor-sim", table, &o, argc, argv)) {
    case RUMOR_OPTS_HELP:
        fputs(usage, stdout);
        return 0;
    case RUMOR_OPTS_VERSION:
        printf("rumor-sim (rumor) %s\n", PACKAGE_VERSION);
        return 0;
    case RUMOR_OPTS_ERROR:
        return 2;
    }
    /* thousands of simulated peers each logging their joins and deaths
     * would drown the figures: SWIM's own lines only when asked for */
    if (!getenv("RUMOR_LOG"))
        rumor_log_set_level(RUMOR_LOG_WARN);
    sim_config_t c = { .peers = o.peers, .join_over = o.join_over, .duration = o.duration,
                       .latency_ms = o.latency, .jitter_ms = o.jitter, .loss = o.loss,
                       .rate_mbit = o.rate, .kill_rate = o.kill_rate, .leave_share = o.leave_share,
                       .kill_at = o.kill_at, .burst_at = -1, .observers = o.observers,
                       .max_members = o.max_members, .sample_every = o.sample,
                       .progress = o.quiet ? 0 : o.progress, .wall_limit = o.wall_limit,
                       .seed = (uint64_t)o.seed, .rounds = o.rounds, .topology = o.topology,
                       .model_params = o.model, .round_cpu_ms = o.cpu_ms, .cores = o.cores,
                       .round_timeout = o.round_timeout,
                       .min_round_timeout = o.min_round_timeout < o.round_timeout
                                                ? o.min_round_timeout
                                                : o.round_timeout,
                       .drift = o.drift, .dim = o.dim,
                       .heartbeat_timeout = o.heartbeat_timeout, .new_edge_grace = o.grace,
                       .init_spread = o.init_spread, .target = o.target };
    if (o.lifetime) {
        /* only exponential lifetimes so far: the prefix leaves room for others */
        char *end = NULL;
        errno = 0;
        if (!strncmp(o.lifetime, "exp:", 4))
            c.lifetime_mean = strtod(o.lifetime + 4, &end);
        if (!end || end == o.lifetime + 4 || *end || errno || !(c.lifetime_mean > 0) ||
            c.lifetime_mean > 1e9)
            return bad("--lifetime '%s': expected exp:MEAN, MEAN seconds in (0, 1e9]",
                       o.lifetime);
    }
    if (o.rounds) { /* the family must lay over a view: tried on 2 and 9 members */
        rumor_swim_member_t v[9];
        memset(v, 0, sizeof v);
        for (int i = 0; i < 9; i++)
            v[i].id = (uint64_t)(i + 1) << 59;
        for (size_t n = 2; n <= 9; n += 7) {
            rumor_topo_t *t = NULL;
            int self;
            if (rumor_swim_topology(o.topology, v, n, v[0].id, &t, &self) < 0) {
                fprintf(stderr, "rumor-sim: --topology '%s': %s\n", o.topology, rumor_err_msg());
                fprintf(stderr, "Try 'rumor-sim --help' for more information.\n");
                return 2;
            }
            rumor_topo_destroy(&t);
        }
    }
    if (o.burst) {
        char *end = NULL;
        errno = 0;
        c.burst_at = strtod(o.burst, &end);
        long k = end && *end == ':' ? strtol(end + 1, &end, 10) : -1;
        if (!end || *end || errno || !(c.burst_at >= 0 && c.burst_at <= 1e6) || k < 1 ||
            k >= o.peers)
            return bad("--burst '%s': expected T:K, T seconds in [0, 1e6] and K peers in "
                       "[1, --peers)", o.burst);
        c.burst_n = (int)k;
    }
    if (o.max_members == 1)
        return bad("--max-members '%s': expected 0 (the default) or at least 2", "1");
    if (o.svg && !writable_dir(o.svg))
        return bad("--svg '%s': its directory does not exist", o.svg);
    sim_link_t *links = NULL;
    if (o.net && sim_links_read(o.net, &links, &c.nlinks) < 0) {
        fprintf(stderr, "rumor-sim: --net %s\n", rumor_err_msg());
        return 1; /* an input file found wrong is a runtime error (test_exit_status.sh) */
    }
    c.links = links;

    sim_result_t r;
    int rc = sim_run(&c, &r);
    if (rc < 0) {
        fprintf(stderr, "rumor-sim: %s (%s)\n", rumor_err_msg(), rumor_err_trace());
        free(links);
        return 1;
    }
    if (o.json)
        rc = sim_report_json(stdout, &c, &r);
    else
        sim_report_table(stdout, &c, &r);
    if (rc == 0 && o.svg)
        rc = sim_report_svg(o.svg, &c, &r);
    if (rc < 0)
        fprintf(stderr, "rumor-sim: %s\n", rumor_err_msg());
    sim_result_free(&r);
    free(links);
    return rc < 0 ? 1 : 0;
}
