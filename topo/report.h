/* What rumor-topo prints: the analysis report (text, JSON, graphviz, SVG),
 * side-by-side comparisons, and the ranked recommendation. The library
 * builds the numbers (spectrum.h, cost.h); this module only lays them out,
 * so the CLI and the tests print exactly the same things. */
#ifndef RUMOR_TOPO_REPORT_H
#define RUMOR_TOPO_REPORT_H

#include <stdio.h>

#include "cost.h"
#include "spectrum.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One analyzed topology. */
typedef struct rumor_topo_result {
    char spec[96];            /* kept when topo could not be built */
    rumor_topo_t *topo;       /* NULL for a candidate that failed to build */
    rumor_topo_analysis_t an;
    int has_cost;             /* a model size was given */
    rumor_topo_cost_t cost;
    rumor_gossip_plan_t plan; /* priced: the codec, its consensus step, local steps */
    long rounds;              /* rounds to eps under the plan (-1 never) */
    char network[160];        /* "default network (...)" or the link file */
    char note[160];           /* recommend: why a candidate was excluded, or "" */
} rumor_topo_result_t;

/* Analyzes t and, when model_bytes > 0, prices it on `links` (the default
 * network when NULL). Takes ownership of t (freed by _result_free). */
int rumor_topo_result_make(rumor_topo_t *t, const rumor_analyze_opts_t *o, double model_bytes,
                           const rumor_links_t *links, const char *network,
                           const rumor_gossip_plan_t *plan, rumor_topo_result_t *r) RUMOR_WUR;
void rumor_topo_result_free(rumor_topo_result_t *r);

/* The readable report of one topology. */
void rumor_topo_print_report(FILE *f, const rumor_topo_result_t *r);
/* A side-by-side table. */
void rumor_topo_print_compare(FILE *f, const rumor_topo_result_t *r, int count);
/* JSON: one object, or an array of `count` objects when as_array. */
int rumor_topo_print_json(FILE *f, const rumor_topo_result_t *r, int count, int as_array) RUMOR_WUR;
/* Graphviz: the graph with its weights (a digraph for non-symmetric or
 * time-varying W, one colour a round). */
void rumor_topo_print_dot(FILE *f, const rumor_topo_t *t);
/* An SVG with the graph, the spectrum and the consensus decay. */
int rumor_topo_write_svg(const char *path, const rumor_topo_result_t *r) RUMOR_WUR;

/* Human-readable bytes ("100 MB") and seconds ("3.2 ms") into buf. */
const char *rumor_topo_fmt_bytes(char *buf, size_t len, double bytes);
const char *rumor_topo_fmt_seconds(char *buf, size_t len, double s);

typedef struct rumor_recommend_opts {
    int peers;
    double model_bytes;
    const char *links_path; /* NULL: the default network */
    int max_degree;         /* messages a peer may send per round; 0 = any */
    double eps;             /* default 1e-6 */
    rumor_eig_method method;
    double time_limit;      /* per candidate, as in rumor_analyze_opts_t */
    rumor_eig_progress_fn progress;
    void *progress_arg;
    const char *codecs;     /* comma-separated codecs to price; NULL: none,int8,int4,topk:0.1 */
    rumor_gossip_plan_t plan; /* the consensus step, keyframes and local steps of each */
} rumor_recommend_opts_t;

/* Builds, analyzes and prices the candidate topologies for o->peers peers
 * and sorts them by predicted time to eps (fastest first); excluded ones
 * follow with r[i].note saying why. *out gets *count results (free each
 * with rumor_topo_result_free, then the array). */
int rumor_topo_recommend(const rumor_recommend_opts_t *o, rumor_topo_result_t **out,
                         int *count) RUMOR_WUR;
void rumor_topo_print_recommend(FILE *f, const rumor_recommend_opts_t *o,
                                const rumor_topo_result_t *r, int count);

#ifdef __cplusplus
}
#endif
#endif
