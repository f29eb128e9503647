/* The rumor-topo binary, run as a user would: --json fields against closed
 * forms computed here (up to 2^20 peers), the weights file round trip
 * through the CLI (bestconst's negative self-weights included), --time-limit
 * on a graph too big to solve, the cost section against a hand computation,
 * recommend's ranking, the help pages, and bad input exiting non-zero with a
 * message naming the problem. */
#include "config.h"

#include <cjson/cJSON.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "testutil.h"

static const double PI = 3.14159265358979323846;
static char bin[1024], errpath[600];
static char out[1 << 20], errtext[1 << 16];

static int run(const char *args);

/* Bad input: the exit status and a message naming the problem. */
static void bad(const char *args, int code, const char *want)
{
    int rc = run(args);
    CHECKF(rc == code && strstr(errtext, want), "rumor-topo %s: exit %d (want %d), stderr '%s' "
                                                "lacks '%s'",
           args, rc, code, errtext, want);
}

/* Runs rumor-topo with args; returns the exit status, fills out/errtext. */
static int run(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "RUMOR_LOG=warn RUMOR_BLAS_AUTOTUNE=0 OPENBLAS_NUM_THREADS=1 '%s' %s 2>'%s'",
             bin, args, errpath);
    FILE *p = popen(cmd, "r");
    if (!p) {
        perror("popen");
        exit(99);
    }
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = 0;
    int st = pclose(p);
    FILE *e = fopen(errpath, "r");
    len = e ? fread(errtext, 1, sizeof errtext - 1, e) : 0;
    errtext[len] = 0;
    if (e)
        fclose(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* run() under `timeout`, so that a command that never finishes fails the
 * test instead of hanging it (exit 124). */
static int run_limited(const char *args, int secs)
{
    char a[2048];
    snprintf(a, sizeof a, "%s", args);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "RUMOR_LOG=warn RUMOR_BLAS_AUTOTUNE=0 OPENBLAS_NUM_THREADS=1 "
                              "timeout -k 5 %d '%s' %s 2>'%s'",
             secs, bin, a, errpath);
    FILE *p = popen(cmd, "r");
    if (!p) {
        perror("popen");
        exit(99);
    }
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = 0;
    int st = pclose(p);
    FILE *e = fopen(errpath, "r");
    len = e ? fread(errtext, 1, sizeof errtext - 1, e) : 0;
    errtext[len] = 0;
    if (e)
        fclose(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static cJSON *run_json(const char *args)
{
    int rc = run(args);
    CHECKF(rc == 0, "rumor-topo %s: exit %d: %s", args, rc, errtext);
    cJSON *j = cJSON_Parse(out);
    CHECKF(j != NULL, "rumor-topo %s: output is not JSON: %.200s", args, out);
    return j;
}

static void test_json_closed_forms(void)
{
    cJSON *j = run_json("analyze ring:16 --json");
    double l2 = 1.0 / 3 + 2.0 / 3 * cos(2 * PI / 16), ln = -1.0 / 3;
    CHECK(num(j, "n") == 16 && num(j, "edges") == 16);
    CHECK(num(j, "degree_min") == 2 && num(j, "degree_max") == 2);
    CHECK_CLOSE(num(j, "lambda2"), l2, 1e-12, 0);
    CHECK_CLOSE(num(j, "lambda_min"), ln, 1e-12, 0);
    CHECK_CLOSE(num(j, "rho"), l2, 1e-12, 0);
    CHECK_CLOSE(num(j, "spectral_gap"), 1 - l2, 1e-12, 0);
    CHECK(num(j, "rounds_to_1e-6") == ceil(log(1e6) / log(1 / l2)));
    const cJSON *sim = cJSON_GetObjectItemCaseSensitive(j, "simulation");
    CHECK(sim && num(sim, "final_error") <= 1e-6 && fabs(num(sim, "measured_rate") - l2) < 1e-3);
    cJSON_Delete(j);

    j = run_json("analyze hypercube:4 --json --no-sim");
    CHECK_CLOSE(num(j, "lambda2"), 3.0 / 5, 1e-12, 0);
    CHECK_CLOSE(num(j, "lambda_min"), -3.0 / 5, 1e-12, 0);
    CHECK(num(j, "rounds_to_1e-6") == ceil(log(1e6) / log(5.0 / 3)));
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "simulation"));
    cJSON_Delete(j);

    j = run_json("analyze complete:8 --json");
    CHECK_CLOSE(num(j, "rho"), 0, 1e-12, 0);
    CHECK(num(j, "rounds_to_1e-6") == 1 && num(j, "exact_after") == 1);
    cJSON_Delete(j);

    j = run_json("analyze onepeer-exp:16 --json");
    CHECK(num(j, "exact_after") == 4 && num(j, "rho") == 0 && num(j, "period") == 4);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "lambda2")));
    cJSON_Delete(j);

    /* the sparse path gives the same answer */
    j = run_json("analyze ring:40 --json --method lanczos --no-sim");
    CHECK_CLOSE(num(j, "lambda2"), 1.0 / 3 + 2.0 / 3 * cos(2 * PI / 40), 1e-9, 0);
    cJSON_Delete(j);

    /* Petersen graph from a file: W = (I + A)/4, A has eigenvalues 3, 1, -2 */
    char args[1200];
    const char *src = getenv("RUMOR_SRCDIR");
    snprintf(args, sizeof args, "analyze 'file:%s/tests/data/topo/petersen.txt' --json",
             src && *src ? src : "..");
    j = run_json(args);
    CHECK(num(j, "n") == 10 && num(j, "edges") == 15);
    CHECK_CLOSE(num(j, "lambda2"), 0.5, 1e-12, 0);
    CHECK_CLOSE(num(j, "lambda_min"), -0.25, 1e-12, 0);
    cJSON_Delete(j);

    j = run_json("compare ring:8 torus:3x3 --json");
    CHECK(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 2);
    CHECK(num(cJSON_GetArrayItem(j, 0), "n") == 8 && num(cJSON_GetArrayItem(j, 1), "n") == 9);
    CHECK_CLOSE(num(cJSON_GetArrayItem(j, 1), "lambda2"), (1 + 2 + 2 * cos(2 * PI / 3)) / 5, 1e-12,
                0);
    cJSON_Delete(j);
}

static void test_weights_roundtrip(void)
{
    char args[1200], wpath[600];
    snprintf(wpath, sizeof wpath, "%s/t.w", tu_tmpdir());
    snprintf(args, sizeof args, "weights grid:3x4 --weights fmmc -o '%s'", wpath);
    CHECK(run(args) == 0);
    cJSON *a = run_json("analyze grid:3x4 --weights fmmc --json --no-sim");
    cJSON *m = run_json("analyze grid:3x4 --json --no-sim");
    snprintf(args, sizeof args, "analyze grid:3x4 --weights 'file:%s' --json --no-sim", wpath);
    cJSON *b = run_json(args);
    CHECK(num(a, "rho") == num(b, "rho")); /* %.17g: the very same W */
    CHECK(num(a, "rho") <= num(m, "rho"));
    const cJSON *wn = cJSON_GetObjectItemCaseSensitive(b, "weights");
    CHECK(cJSON_IsString(wn) && !strcmp(wn->valuestring, "file"));
    cJSON_Delete(a), cJSON_Delete(b), cJSON_Delete(m);
    CHECK(run("weights ring:3 -o -") == 0);
    CHECK(!strncmp(out, "rumor-weights 1 n=3 period=1\n", 29));
    CHECK(strstr(out, "\n0 1 0.33333333333333331\n") != NULL);
    unlink(wpath);
}

/* Item 12: what `weights --weights bestconst` writes, `--weights file:`
 * reads back. On star:10, a = 2/11 and the centre's self-weight is
 * 1 - 9a = -7/11; W's eigenvalues are 1, 9/11 and -9/11 (see
 * test_topo_weights.c), so rho = 9/11. */
static void test_bestconst_file(void)
{
    char args[1200], wpath[600];
    snprintf(wpath, sizeof wpath, "%s/star.w", tu_tmpdir());
    snprintf(args, sizeof args, "weights star:10 --weights bestconst -o '%s'", wpath);
    CHECK(run(args) == 0);
    FILE *f = fopen(wpath, "r");
    char line[256];
    double w00 = NAN;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "0 0 ", 4))
            w00 = strtod(line + 4, NULL);
    if (f)
        fclose(f);
    CHECK_CLOSE(w00, -7.0 / 11, 1e-15, 0);
    snprintf(args, sizeof args, "analyze star:10 --weights 'file:%s' --json", wpath);
    int rc = run(args);
    CHECKF(rc == 0, "rumor-topo %s: exit %d: %s", args, rc, errtext);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    CHECK_CLOSE(num(j, "rho"), 9.0 / 11, 1e-12, 0);
    CHECK_CLOSE(num(j, "lambda_min"), -9.0 / 11, 1e-12, 0);
    cJSON_Delete(j);
    /* a file whose negative entries do not mix is refused, naming it */
    f = fopen(wpath, "w");
    fputs("rumor-weights 1 n=2\n0 0 -1\n0 1 2\n1 0 2\n1 1 -1\n", f);
    fclose(f);
    snprintf(args, sizeof args, "analyze ring:2 --weights 'file:%s'", wpath);
    bad(args, 1, "star.w: W(0,0) = -1 is negative and rho(W - 11^T/n)");
    unlink(wpath);
}

/* Item 13: the closed forms at 2^20 peers, checked against formulas derived
 * here. MH on a ring is W = (I + S + S^T)/3, eigenvalues (1 + 2cos(2 pi k/n))/3:
 * lambda_2 at k = 1, gap 1 - lambda_2 = (2/3)(1 - cos(2 pi/n)) = (4/3)
 * sin^2(pi/n), lambda_n = -1/3 at k = n/2. On the RxC torus, (1 + 2cos(2 pi
 * a/R) + 2cos(2 pi b/C))/5: gap (4/5) sin^2(pi/C) at (0, 1) for C >= R,
 * lambda_n = -3/5 for even sides. sin^2 keeps the digits that 1 - cos loses
 * at 1e-11. `timeout` only turns a hang into a failure. */
static void check_big(const char *args, double gap, double l2, double ln)
{
    int rc = run_limited(args, 300);
    CHECKF(rc == 0, "rumor-topo %s: exit %d: %s", args, rc, errtext);
    cJSON *j = cJSON_Parse(out);
    CHECKF(j != NULL, "rumor-topo %s: not JSON", args);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "method");
    CHECKF(cJSON_IsString(m) && !strncmp(m->valuestring, "closed-form (", 13),
           "rumor-topo %s: method %s", args, cJSON_IsString(m) ? m->valuestring : "?");
    CHECK_CLOSE(num(j, "spectral_gap"), gap, 0, 1e-9);
    CHECK_CLOSE(num(j, "lambda2"), l2, 1e-14, 0);
    CHECK_CLOSE(num(j, "lambda_min"), ln, 1e-14, 0);
    CHECK_CLOSE(num(j, "rho"), l2, 1e-14, 0);
    CHECK_CLOSE(num(j, "rounds_to_1e-6"), ceil(log(1e6) / -log1p(-gap)), 0, 1e-9);
    cJSON_Delete(j);
}

static void test_big_closed_form(void)
{
    double s = sin(PI / 1048576);
    check_big("analyze ring:1048576 --json", 4.0 / 3 * s * s, 1 - 4.0 / 3 * s * s, -1.0 / 3);
    s = sin(PI / 50000);
    check_big("analyze ring:50000 --json", 4.0 / 3 * s * s, 1 - 4.0 / 3 * s * s, -1.0 / 3);
    s = sin(PI / 1024);
    check_big("analyze torus:1024x1024 --json --no-sim", 4.0 / 5 * s * s, 1 - 4.0 / 5 * s * s,
              -3.0 / 5);
    /* the method shows in the text report too */
    CHECK(run("analyze torus:16x32 --no-sim") == 0 &&
          strstr(out, "spectrum  closed-form (circulant 16x32)"));
}

/* An unstructured graph too big to solve in the time allowed stops with
 * what it knows and exit status 1, after progress reports. */
static void test_time_limit(void)
{
    int rc = run_limited("analyze rreg:200000:4 --time-limit 1.5", 120);
    CHECKF(rc == 1, "exit %d: %s", rc, errtext);
    CHECKF(strstr(errtext, "rreg:200000:4: spectrum: stopped at the time limit of 1.5 s after ") &&
               strstr(errtext, "Known so far: lambda_2 >= 0.") &&
               strstr(errtext, "so rho >= 0.") && strstr(errtext, "Raise --time-limit"),
           "stderr: %s", errtext);
    CHECKF(strstr(errtext, "rumor-topo: rreg:200000:4: sparse (Lanczos): 1 s, "), "stderr: %s",
           errtext);
    CHECK(strlen(out) == 0);
    bad("analyze ring:8 --time-limit soon", 2, "--time-limit 'soon'");
    CHECK(run("analyze ring:40 --method lanczos --time-limit 0 --no-sim") == 0);
    CHECK(run("analyze --help") == 0 && strstr(out, "--time-limit S"));
}

static void test_cost(void)
{
    char lpath[600], args[1200];
    snprintf(lpath, sizeof lpath, "%s/r.links", tu_tmpdir());
    FILE *f = fopen(lpath, "w");
    fputs("default 10Gbit 1ms\nnic all 1Gbit\n", f);
    fclose(f);
    snprintf(args, sizeof args, "analyze ring:4 --model-bytes 100MB --links '%s' --json", lpath);
    cJSON *j = run_json(args);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cost");
    CHECK(c != NULL);
    CHECK_CLOSE(num(c, "round_seconds"), 1e-3 + 100e6 / 62.5e6, 1e-12, 1e-12);
    CHECK(num(c, "bytes_per_peer_max") == 200e6);
    CHECK_CLOSE(num(c, "seconds_to_eps"), num(c, "round_seconds") * num(j, "rounds_to_eps"), 0,
                1e-12);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "analyze ring:4 --model-bytes 100MB --links '%s'", lpath);
    CHECK(run(args) == 0 && strstr(out, "per round     1.6 s") && strstr(out, "links from"));
    unlink(lpath);
}

static void test_recommend(void)
{
    cJSON *j = run_json("recommend --peers 16 --model-bytes 10MB --json");
    int n = cJSON_GetArraySize(j), ranked = 0, sorted = 1;
    double prev = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(j, i), *c = cJSON_GetObjectItemCaseSensitive(e, "cost");
        if (cJSON_GetObjectItemCaseSensitive(e, "excluded"))
            continue;
        ranked++;
        double t = num(c, "seconds_to_eps");
        sorted &= t >= prev;
        prev = t;
    }
    CHECK(ranked >= 10 && sorted);
    cJSON_Delete(j);
    /* one message a round: only the one-peer graphs remain */
    j = run_json("recommend --peers 16 --model-bytes 10MB --max-degree 1 --json");
    int ok = 1, kept = 0;
    for (int i = 0; i < cJSON_GetArraySize(j); i++) {
        const cJSON *e = cJSON_GetArrayItem(j, i), *c = cJSON_GetObjectItemCaseSensitive(e, "cost");
        if (cJSON_GetObjectItemCaseSensitive(e, "excluded"))
            continue;
        kept++;
        ok &= num(c, "messages_per_peer_max") <= 1;
    }
    CHECK(ok && kept >= 2);
    cJSON_Delete(j);
    CHECK(run("recommend --peers 24 --model-bytes 50MB --max-degree 2") == 0);
    CHECK(strstr(out, "rank") && strstr(out, "best: ") && strstr(out, "not ranked:"));
}

/* Gossip plans: a codec shrinks each message by its share (keyframes
 * included) and slows consensus by its step; recommend ranks (topology,
 * codec) pairs and, with a compute time, suggests the local steps that
 * hide the communication. On 100 Mbit/s, 25 ms links and 10 ms of compute
 * a step, an 8-peer ring's int8 round moves 0.30 of f32's bytes. */
static void test_plans(void)
{
    char lpath[600], args[1200];
    snprintf(lpath, sizeof lpath, "%s/wan.links", tu_tmpdir());
    FILE *f = fopen(lpath, "w");
    fputs("default 100Mbit 25ms\ncompute 10ms\n", f);
    fclose(f);
    snprintf(args, sizeof args, "analyze ring:8 --model-bytes 1077288 --links '%s' --compress int8 "
                                "--local-steps 4 --json", lpath);
    cJSON *j = run_json(args);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cost");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "plan");
    double fct = 1.0 / 16 + 15.0 / 16 * 260 / 1024, comm = 0.025 + 1077288 * fct / 12.5e6;
    CHECK(p != NULL);
    CHECK_CLOSE(num(p, "bytes_factor"), fct, 0, 1e-12);
    CHECK(num(p, "local_steps") == 4 && num(p, "keyframe_every") == 16);
    CHECK_CLOSE(num(c, "round_seconds"), 0.03 + comm, 1e-12, 1e-12);
    CHECK_CLOSE(num(c, "step_seconds"), (0.03 + comm) / 4, 1e-12, 1e-12);
    CHECK_CLOSE(num(p, "rho"), num(j, "rho"), 1e-12, 0); /* int8: gamma 1 */
    cJSON_Delete(j);
    snprintf(args, sizeof args, "analyze ring:8 --model-bytes 1077288 --links '%s' --compress "
                                "topk:0.1 --json", lpath);
    j = run_json(args);
    p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "cost"), "plan");
    /* gamma 0.2: 1 - 0.2 (1 - lambda_2) */
    CHECK_CLOSE(num(p, "rho"), 1 - 0.2 * (1 - num(j, "lambda2")), 1e-12, 0);
    CHECK(num(p, "rounds_to_eps") > num(j, "rounds_to_eps"));
    cJSON_Delete(j);
    snprintf(args, sizeof args, "recommend --peers 8 --model-bytes 1077288 --links '%s' "
                                "--compress none,int8", lpath);
    CHECK(run(args) == 0 && strstr(out, "int8") && strstr(out, "per step") &&
          strstr(out, "--local-steps"));
    snprintf(args, sizeof args, "recommend --peers 8 --model-bytes 1077288 --links '%s' "
                                "--compress none,int8 --json", lpath);
    j = run_json(args);
    int n8 = 0, n0 = 0;
    for (int i = 0; i < cJSON_GetArraySize(j); i++) {
        const cJSON *e = cJSON_GetArrayItem(j, i);
        const cJSON *cc = cJSON_GetObjectItemCaseSensitive(e, "cost");
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(cc, "plan");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(pp, "codec");
        if (cJSON_IsString(name) && strcmp(name->valuestring, "int8") == 0)
            n8++;
        else if (cJSON_IsString(name))
            n0++;
    }
    CHECK(n8 >= 10 && n8 == n0);
    cJSON_Delete(j);
    bad("analyze ring:8 --model-bytes 1MB --compress int9", 2, "expected none, int8, int4");
    bad("recommend --peers 8 --model-bytes 1MB --compress none,topk:3", 2, "in (0, 1]");
    bad("analyze ring:8 --model-bytes 1MB --consensus-step 0", 2, "--consensus-step '0'");
    bad("analyze ring:8 --model-bytes 1MB --local-steps 0", 2, "--local-steps '0'");
    /* streamed (rumor-peer --fragments 4 --overlap 1 with 8 local steps): a
     * round is 2 steps and a quarter of the model; 1 step computes, then
     * max(comm, 1 step) while the fragment is away; eps takes 4 rounds a
     * consensus round */
    snprintf(args, sizeof args, "analyze ring:8 --model-bytes 1077288 --links '%s' "
                                "--local-steps 8 --fragments 4 --overlap 1 --json", lpath);
    j = run_json(args);
    c = cJSON_GetObjectItemCaseSensitive(j, "cost");
    p = cJSON_GetObjectItemCaseSensitive(c, "plan");
    double cf = 0.025 + 1077288 / 4.0 / 12.5e6, rf = 0.01 + (cf > 0.01 ? cf : 0.01);
    CHECK(p && num(p, "fragments") == 4 && num(p, "overlap") == 1 && num(p, "local_steps") == 8);
    CHECK_CLOSE(num(c, "bytes_per_peer_max"), 2 * 1077288 / 4.0, 1e-12, 0);
    CHECK_CLOSE(num(c, "round_seconds"), rf, 1e-12, 1e-12);
    CHECK_CLOSE(num(c, "step_seconds"), rf / 2, 1e-12, 1e-12);
    CHECK_CLOSE(num(c, "seconds_to_eps"), num(j, "rounds_to_eps") * 4 * rf, 1e-9, 0);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "recommend --peers 8 --model-bytes 1077288 --links '%s' "
                                "--compress none", lpath);
    CHECK(run(args) == 0 && strstr(out, "--fragments") && strstr(out, "--overlap 1"));
    bad("analyze ring:8 --model-bytes 1MB --local-steps 8 --fragments 3", 2,
        "--local-steps 8 is not a multiple");
    bad("analyze ring:8 --model-bytes 1MB --local-steps 8 --fragments 4 --overlap 3", 2,
        "at most H / F = 2");
    unlink(lpath);
}

static void test_outputs(void)
{
    char svg[600], args[1200];
    snprintf(svg, sizeof svg, "%s/g.svg", tu_tmpdir());
    snprintf(args, sizeof args, "analyze torus:4x4 --svg '%s'", svg);
    CHECK(run(args) == 0 && strstr(out, "lambda_2"));
    FILE *f = fopen(svg, "r");
    char head[64] = "";
    CHECK(f && fgets(head, sizeof head, f) && !strncmp(head, "<svg", 4));
    if (f)
        fclose(f);
    unlink(svg);
    CHECK(run("analyze ring:5 --dot") == 0 && !strncmp(out, "graph \"ring:5\"", 14) &&
          strstr(out, "0 -- 1 [label=\"0.333\"]"));
    CHECK(run("analyze onepeer-exp:4 --dot") == 0 && !strncmp(out, "digraph", 7));
}

static void test_help(void)
{
    static const char *const cmds[] = { "--help", "analyze --help", "compare --help",
                                        "recommend --help", "weights --help", "help analyze" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = run(cmds[i]);
        CHECKF(rc == 0 && strstr(out, "SYNOPSIS") && strstr(out, "EXIT STATUS"),
               "rumor-topo %s: exit %d", cmds[i], rc);
    }
    CHECK(run("analyze --help") == 0 && strstr(out, "--model-bytes") && strstr(out, "EXAMPLES"));
    CHECK(run("--help") == 0 && strstr(out, "rreg:N:D[:seed=S]") && strstr(out, "bestconst"));
}


static void test_errors(void)
{
    char epath[600], args[1200];
    snprintf(epath, sizeof epath, "%s/bad.txt", tu_tmpdir());
    FILE *f = fopen(epath, "w");
    fputs("0 1\n1 x\n", f);
    fclose(f);
    snprintf(args, sizeof args, "analyze 'file:%s'", epath);
    bad(args, 1, "bad.txt:2: peer ids '1' 'x' are not integers");
    unlink(epath);
    /* the command line's own SPECs and weights: bad usage (2); files: 1 */
    bad("analyze ring:abc", 2, "spec 'ring:abc': N 'abc' is not an integer");
    bad("analyze hexagon:6", 2, "unknown family 'hexagon'");
    bad("analyze ring:9999999", 2, "1048576");
    bad("analyze star:5 --weights uniform", 2, "uniform weights need a regular graph");
    bad("analyze ring:8 --weights file:/nonexistent.w", 1, "/nonexistent.w: No such file");
    bad("analyze ring:8 --links /nonexistent.links --model-bytes 1MB", 1, "/nonexistent.links");
    bad("analyze", 2, "expected a SPEC");
    bad("analyze ring:8 ring:9", 2, "expected one SPEC");
    bad("analyze ring:8 --frobnicate", 2, "unknown option '--frobnicate'");
    bad("analyze ring:8 --model-bytes lots", 2, "size 'lots'");
    bad("analyze ring:8 --eps 2", 2, "--eps '2'");
    bad("analyze ring:8 --method magic", 2, "unknown method 'magic'");
    bad("analyze ring:8 --weights", 2, "needs a value");
    bad("analyze ring:8 --links x.links", 2, "--links needs --model-bytes");
    bad("recommend --peers 8", 2, "--peers and --model-bytes are required");
    bad("recommend --peers 1 --model-bytes 1MB", 2, "--peers '1'");
    bad("weights ring:8", 2, "-o FILE is required");
    bad("weights ring:8 -o /nonexistent-dir/w", 2, "/nonexistent-dir/w");
    bad("transmogrify", 2, "unknown command 'transmogrify'");
    CHECK(run("") == 2);
}

int main(void)
{
    const char *b = getenv("RUMOR_BUILDDIR");
    snprintf(bin, sizeof bin, "%s/rumor-topo", b && *b ? b : ".");
    if (access(bin, X_OK) != 0)
        TEST_SKIP("%s not built", bin);
    snprintf(errpath, sizeof errpath, "%s/stderr", tu_tmpdir());
    test_json_closed_forms();
    test_weights_roundtrip();
    test_bestconst_file();
    test_big_closed_form();
    test_time_limit();
    test_cost();
    test_recommend();
    test_plans();
    test_outputs();
    test_help();
    test_errors();
    unlink(errpath);
    rmdir(tu_tmpdir());
    return tu_finish("test_topo_cli");
}
