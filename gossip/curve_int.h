/* CurveZMQ's internals (not installed): the key-file reading of curve.c
 * (keys and key files), which curve_allow.c (allow-lists, which may be key
 * files too) shares. curve_zap.c (the ZAP handler) uses only curve.h. */
#ifndef RUMOR_CURVE_INT_H
#define RUMOR_CURVE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "curve.h"

#define KEYFILE_MAX (64 * 1024)         /* a key file is a few lines */
#define ALLOWFILE_MAX ((size_t)256 << 20) /* 1M keys with names fit */

/* What a key file holds. */
typedef struct curve_keyfile {
    int have_pub, have_sec;
    uint8_t pub[RUMOR_CURVE_KEY_BYTES], sec[RUMOR_CURVE_KEY_BYTES];
} curve_keyfile_t;

/* Reads a whole file (at most cap bytes) into a NUL-terminated buffer the
 * caller frees (wiping it first when it may hold a secret). *st gets the
 * open file's status. */
int curve_slurp(const char *path, size_t cap, char **out, size_t *len, struct stat *st);

/* Parses a key file's text (modified in place). bare: a line that is only
 * a Z85 key counts as the public key. Errors name path:line. */
int curve_parse_keyfile(const char *path, char *text, int bare, curve_keyfile_t *kf);

/* s without its leading and trailing blanks (cut in place). */
char *curve_trim(char *s);

/* Ends a line where its comment starts: at a '#' that begins the line or
 * follows a blank, outside double quotes. '#' is in Z85's alphabet, so a
 * '#' inside a word (a key) is not a comment. */
void curve_cut_comment(char *s);

/* Re-records the last error as rc with "path:line: " before it. */
int curve_at_line(int rc, const char *path, int line);

#endif
