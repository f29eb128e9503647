/* Small text helpers shared by topo's readers (spec strings, edge lists,
 * weights and link files): bounded line reading and strict number parsing,
 * so that "12abc", "1e999" or an empty field is an error, never a 12.
 * Internal: not installed, and not exported (RUMOR_INTERNAL). */
#ifndef RUMOR_TOPO_TEXT_H
#define RUMOR_TOPO_TEXT_H

#include <stdio.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUMOR_TOPO_LINE_MAX 4096

/* Reads the next line into buf (newline and any '#' comment removed,
 * surrounding blanks trimmed), counting lines in *lineno. Returns 1 for a
 * line (possibly empty), 0 at end of file, RUMOR_EFORMAT for a line longer
 * than RUMOR_TOPO_LINE_MAX or containing a NUL byte, RUMOR_EIO on a read
 * error; `what` names the file in the message. */
RUMOR_INTERNAL int rumor_topo_readline(FILE *f, char *buf, size_t size, int *lineno,
                                       const char *what);

/* Whole-string integer in [lo, hi]; 0 or -1 (no message: the caller knows
 * which field it was). */
RUMOR_INTERNAL int rumor_topo_parse_long(const char *s, long lo, long hi, long *out);
/* Whole-string finite double; 0 or -1. */
RUMOR_INTERNAL int rumor_topo_parse_double(const char *s, double *out);

/* Splits buf in place on blanks into at most max fields; returns the count
 * (max + 1 when there were more). */
RUMOR_INTERNAL int rumor_topo_split(char *buf, char **field, int max);

#ifdef __cplusplus
}
#endif
#endif
