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

void rumor_blas_autotune(int argc, char **argv)
{
    (void)argc;
    const char *env = getenv("RUMOR_BLAS_AUTOTUNE");
    const char *better = rumor_blas_better_core();
    if (getenv("OPENBLAS_CORETYPE")) {
        /* The user chose, or this is the re-executed process. */
        rumor_debug("OpenBLAS core %s (OPENBLAS_CORETYPE=%s)", rumor_blas_corename(),
                    getenv("OPENBLAS_CORETYPE"));
        return;
    }
    if (!better) {
        rumor_debug("OpenBLAS core %s", rumor_blas_corename());
        return;
    }
    if (env && strcmp(env, "0") == 0) {
        rumor_info("OpenBLAS runs %s kernels; this CPU supports %s (RUMOR_BLAS_AUTOTUNE=0 keeps them)",
                   rumor_blas_corename(), better);
        return;
    }
    rumor_debug("OpenBLAS chose %s kernels on an AVX-512 CPU: restarting with "
                "OPENBLAS_CORETYPE=%s", rumor_blas_corename(), better);
    setenv("OPENBLAS_CORETYPE", better, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* Only reached when exec failed: carry on with the slower kernels. */
    rumor_warn("could not restart with OPENBLAS_CORETYPE=%s (%s kernels stay)", better,
               rumor_blas_corename());
}

void rumor_blas_set_threads(int n)
{
    static int current = -1; /* OpenBLAS keeps one process-wide count */
    if (n < 1)
        n = 1;
    if (n != current) {
        openblas_set_num_threads(n);
        current = n;
    }
}
