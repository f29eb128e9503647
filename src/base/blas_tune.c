/* OpenBLAS core detection and thread control (see blas_tune.h). */
#include "config.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blas_tune.h"
#include "log.h"

/* Exported by OpenBLAS but not declared in Debian's cblas.h. */
char *openblas_get_corename(void);
void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);

const char *rumor_blas_corename(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

/* cpuid leaf 7: AVX-512 F, DQ, BW and VL are what the SkylakeX kernels use;
 * the OS must also save the ZMM state (XCR0 bits 5-7). */
static int cpu_has_avx512_skx(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6) /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM */
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    return (b & f) && (b & dq) && (b & bw) && (b & vl);
}

const char *rumor_blas_better_core(void)
{
    const char *core = rumor_blas_corename();
    /* Cores whose kernels already use AVX-512. */
    static const char *const avx512_cores[] = { "SkylakeX", "Cooperlake", "SapphireRapids" };
    for (size_t i = 0; i < sizeof avx512_cores / sizeof avx512_cores[0]; i++)
        if (strcmp(core, avx512_cores[i]) == 0)
            return NULL;
    if (cpu_has_avx512_skx())
        return "SkylakeX";
    return NULL;
}

/* OPENBLAS_CORETYPE already set does not stop the restart: a Haswell value
 * exported by a site profile or a container image (as on the machines this
 * was measured on) halves GEMM speed as surely as OpenBLAS's own fallback.
 * RUMOR_BLAS_AUTOTUNE=0 is the way to keep slower kernels on purpose, and
 * RUMOR_BLAS_AUTOTUNED_FROM marks the restarted process so it never loops,
 * even when this OpenBLAS ignores the core it was asked for. */
void rumor_blas_autotune(int argc, char **argv)
{
    (void)argc;
    const char *core = rumor_blas_corename();
    const char *from = getenv("RUMOR_BLAS_AUTOTUNED_FROM");
    const char *set = getenv("OPENBLAS_CORETYPE");
    const char *better = rumor_blas_better_core();
    if (from) {
        if (better)
            rumor_warn("OpenBLAS runs %s kernels although restarted with OPENBLAS_CORETYPE=%s",
                       core, set ? set : "(unset)");
        else
            rumor_debug("OpenBLAS core %s (autotuned from %s)", core, from);
        return;
    }
    if (!better) {
        rumor_debug("OpenBLAS core %s%s%s", core, set ? ", OPENBLAS_CORETYPE=" : "",
                    set ? set : "");
        return;
    }
    const char *opt = getenv("RUMOR_BLAS_AUTOTUNE");
    if (opt && strcmp(opt, "0") == 0) {
        rumor_info("OpenBLAS runs %s kernels; this CPU supports %s (RUMOR_BLAS_AUTOTUNE=0 keeps them)",
                   core, better);
        return;
    }
    if (!argv || !argv[0])
        return; /* nothing to restart with */
    if (set)
        rumor_debug("OPENBLAS_CORETYPE=%s runs %s kernels, slower than this CPU supports: "
                   "restarting with %s (RUMOR_BLAS_AUTOTUNE=0 keeps %s)",
                   set, core, better, core);
    else
        rumor_debug("OpenBLAS chose %s kernels on an AVX-512 CPU: restarting with "
                    "OPENBLAS_CORETYPE=%s", core, better);
    setenv("RUMOR_BLAS_AUTOTUNED_FROM", core, 1);
    setenv("OPENBLAS_CORETYPE", better, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* Only reached when exec failed: carry on with the slower kernels.
     * OPENBLAS_CORETYPE stays, so child processes get the better ones. */
    unsetenv("RUMOR_BLAS_AUTOTUNED_FROM");
    rumor_warn("could not restart with OPENBLAS_CORETYPE=%s (%s kernels stay)", better, core);
}

/* Asks OpenBLAS for its current count rather than remembering the last one
 * set here: a cached copy goes stale when anything else sets the count
 * (a direct openblas_set_num_threads, a benchmark), and is a data race
 * between worker threads that each run their own GEMMs. */
void rumor_blas_set_threads(int n)
{
    if (n < 1)
        n = 1;
    if (openblas_get_num_threads() != n)
        openblas_set_num_threads(n);
}
