/* OpenBLAS: which kernels it runs, and how many threads.
 *
 * OpenBLAS (DYNAMIC_ARCH builds such as Debian's 0.3.21) can end up on its
 * Haswell (AVX2) kernels, at about half of peak, on AVX-512 CPUs: when it
 * does not recognise the CPU, or when the environment sets
 * OPENBLAS_CORETYPE=Haswell (some images do). OpenBLAS picks its kernels once, when it is loaded, from the
 * OPENBLAS_CORETYPE environment variable, so the only way to change them is to
 * set that variable and start the program again: rumor_blas_autotune() does
 * that from main(). */
#ifndef RUMOR_BLAS_TUNE_H
#define RUMOR_BLAS_TUNE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The core OpenBLAS is running ("SkylakeX", "Haswell", ...). */
const char *rumor_blas_corename(void);

/* The core OpenBLAS should run on this CPU (from cpuid), or NULL when the
 * running one is already right or no better one is known. */
const char *rumor_blas_better_core(void);

/* Called first thing in main(): when OpenBLAS runs slower kernels than this
 * CPU supports (its own fallback, or an inherited OPENBLAS_CORETYPE such as
 * Haswell), sets OPENBLAS_CORETYPE to the better core and re-executes the
 * program with the same arguments, unless RUMOR_BLAS_AUTOTUNE=0. Returns only when no re-exec was needed or the
 * exec failed (then a warning is logged and the program goes on). */
void rumor_blas_autotune(int argc, char **argv);

/* Sets OpenBLAS's thread count when it differs from the last call. Keep it at
 * 1 when the caller runs its own worker threads: pools must not nest. */
void rumor_blas_set_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
