/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c), their corpus replay
 * driver (replay.c) and the seed generator (mkseeds.c).
 *
 * A target is one LLVMFuzzerTestOneInput: libFuzzer calls it in `make fuzz`
 * (clang-14, -fsanitize=fuzzer,address,undefined), replay.c calls it on every
 * file of tests/fuzz/corpus/<target>/ in `make check` (gcc). A target must be
 * deterministic, must free everything it allocates before it returns (leak
 * detection is on), and writes files only under $TMPDIR. It calls abort()
 * when the library breaks a promise its header makes (a round trip that is
 * not the identity, a row of W that does not sum to 1): libFuzzer and the
 * replay test both report that as a crash. */
#ifndef RUMOR_FUZZ_H
#define RUMOR_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* The entry point libFuzzer calls; returns 0 (libFuzzer's convention: -1
 * would mean "do not add this input to the corpus"). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A file of this process under $TMPDIR (else /tmp), created on first use
 * and removed at exit; `tag` (a few letters) and `suffix` (e.g. ".json", or
 * "") go into its name so a target can keep several. Returns its path, or
 * NULL (with a message on stderr) when it cannot be created. */
const char *fuzz_tmpfile(const char *tag, const char *suffix);

/* Replaces the content of path with data[0..size). 0 or -1. */
int fuzz_write(const char *path, const void *data, size_t size);

/* Silences the library's log (warnings on stderr) for the whole process. */
void fuzz_quiet(void);

/* fuzz_config: the strdup that peers/options.c calls in the fuzz and
 * replay builds (compiled with -Dstrdup=fuzz_opts_strdup). options.h keeps
 * INI strings until exit by design; the target frees them after each input
 * so that LeakSanitizer reports only real leaks. */
char *fuzz_opts_strdup(const char *s);

#endif
