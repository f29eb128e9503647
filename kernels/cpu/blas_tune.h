/* OpenBLAS: which kernels it runs, and how many threads.
 *
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) does not recognise some newer
 * AVX-512 CPUs and falls back to its Haswell (AVX2) kernels at about half of
 * peak. OpenBLAS picks its kernels once, when it is loaded, from the
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

/* Called first thing in main(): when OpenBLAS fell back to slower kernels
 * than this CPU supports and the user has not set OPENBLAS_CORETYPE (or
 * RUMOR_BLAS_AUTOTUNE=0), sets OPENBLAS_CORETYPE and re-executes the program
 * with the same arguments. Returns only when no re-exec was needed or the
 * exec failed (then a warning is logged and the program goes on). */
void rumor_blas_autotune(int argc, char **argv);

/* Sets OpenBLAS's thread count when it differs from the last call. Keep it at
 * 1 when the caller runs its own worker threads: pools must not nest. */
void rumor_blas_set_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
