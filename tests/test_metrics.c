/* Metrics files shared by several processes (src/progress.h): NPROC
 * children, started together, append NEV events each to one file at once,
 * with events of every size from a few bytes to several times the writer's
 * 1 KiB stack buffer. Afterwards every line is one JSON object (read back
 * with cJSON, not with the writer's code) with no key twice, carrying
 * "time", "mono" and its writer's tags (rank, and a swarm name that needs
 * escaping); each writer's events are all there, whole and in order; what
 * the file held before is still there (appended, not truncated); an event
 * with no fields has no dangling comma; tags that do not fit are refused
 * and leave the others as they were. */
#include <cjson/cJSON.h>
#include <sys/wait.h>

#include "progress.h"
#include "testutil.h"

#define NPROC 8
#define NEV 300
#define SWARM "sw \"q\"\\"

/* The pad of event seq: 0 to 3999 bytes, so some events are one byte and
 * some four times the stack buffer. */
static int pad_len(int seq)
{
    return seq * 1237 % 4000;
}

static void writer(const char *path, int rank, int go)
{
    char c;
    if (read(go, &c, 1) < 0) /* returns 0 once the parent closes its end: all start at once */
        _exit(3);
    rumor_metrics_t m;
    if (rumor_metrics_open(&m, path) < 0 || rumor_metrics_tag_int(&m, "rank", rank) < 0 ||
        rumor_metrics_tag_str(&m, "swarm", SWARM) < 0) {
        fprintf(stderr, "writer %d: %s\n", rank, rumor_err_msg());
        _exit(2);
    }
    static char pad[4000];
    memset(pad, 'p', sizeof pad);
    for (int seq = 0; seq < NEV; seq++)
        rumor_metrics_write(&m, "\"event\":\"e\",\"seq\":%d,\"pad\":\"%.*s\"", seq, pad_len(seq),
                            pad);
    rumor_metrics_write(&m, "%s", ""); /* no fields: the tags alone */
    rumor_metrics_close(&m);
    _exit(m.open ? 4 : 0);
}

/* 1 when two members of object o share a name. */
static int duplicate_keys(const cJSON *o)
{
    for (const cJSON *a = o->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string))
                return 1;
    return 0;
}

/* Checks one line; counts its writer's events in seen[]. */
static void check_line(const char *line, size_t len, int lineno, int seen[NPROC], int *bare)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(o, "rank");
    const cJSON *swarm = cJSON_GetObjectItemCaseSensitive(o, "swarm");
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(o, "seq");
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(o, "pad");
    CHECKF(cJSON_IsObject(o), "line %d is not a JSON object: %.80s", lineno, line);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return;
    }
    CHECKF(!duplicate_keys(o), "line %d has a key twice: %.120s", lineno, line);
    CHECKF(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "time")) &&
           cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "mono")),
           "line %d lacks time or mono", lineno);
    CHECKF(cJSON_IsString(swarm) && !strcmp(swarm->valuestring, SWARM), "line %d: swarm %s",
           lineno, cJSON_IsString(swarm) ? swarm->valuestring : "missing");
    int r = cJSON_IsNumber(rank) ? rank->valueint : -1;
    CHECKF(r >= 0 && r < NPROC, "line %d: rank %d", lineno, r);
    if (r >= 0 && r < NPROC && !seq && !pad && cJSON_GetArraySize(o) == 4) {
        ++*bare;
    } else if (r >= 0 && r < NPROC) {
        CHECKF(cJSON_IsNumber(seq) && seq->valueint == seen[r], "line %d: rank %d's event %d, "
               "expected %d", lineno, r, cJSON_IsNumber(seq) ? seq->valueint : -1, seen[r]);
        int want = pad_len(seen[r]);
        CHECKF(cJSON_IsString(pad) && (int)strlen(pad->valuestring) == want &&
               strspn(pad->valuestring, "p") == (size_t)want, "line %d: pad of %zu bytes, "
               "expected %d", lineno, cJSON_IsString(pad) ? strlen(pad->valuestring) : 0, want);
        seen[r]++;
    }
    cJSON_Delete(o);
}

static void check_shared_file(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("{\"before\":1}\n", f) >= 0);
    if (f)
        fclose(f);
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t pids[NPROC];
    for (int r = 0; r < NPROC; r++) {
        if ((pids[r] = fork()) == 0) {
            close(go[1]);
            writer(path, r, go[0]);
        }
    }
    close(go[0]);
    close(go[1]); /* go */
    for (int r = 0; r < NPROC; r++) {
        int st;
        CHECK(waitpid(pids[r], &st, 0) == pids[r]);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d: status %d", r, st);
    }

    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0, seen[NPROC] = { 0 }, bare = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        CHECKF(line[n - 1] == '\n', "line %d does not end with a newline", lineno);
        if (lineno == 1)
            CHECKF(!strcmp(line, "{\"before\":1}\n"), "the file was truncated: %.80s", line);
        else
            check_line(line, (size_t)n - 1, lineno, seen, &bare);
    }
    free(line);
    fclose(f);
    CHECKF(lineno == 1 + NPROC * (NEV + 1), "%d lines, expected %d", lineno,
           1 + NPROC * (NEV + 1));
    for (int r = 0; r < NPROC; r++)
        CHECKF(seen[r] == NEV, "rank %d: %d events, expected %d", r, seen[r], NEV);
    CHECKF(bare == NPROC, "%d events without fields, expected %d", bare, NPROC);
}

static void check_tags(const char *path)
{
    rumor_metrics_t m;
    memset(&m, 0, sizeof m);
    CHECK_ERR(rumor_metrics_tag_int(&m, "rank", 1), RUMOR_EINVAL, "not open");
    CHECK_OK(rumor_metrics_open(&m, path));
    CHECK_OK(rumor_metrics_tag_int(&m, "rank", -3));
    char big[300];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_ERR(rumor_metrics_tag_str(&m, "swarm", big), RUMOR_EINVAL, "does not fit");
    rumor_metrics_write(&m, "\"event\":\"x\"");
    rumor_metrics_close(&m);
    rumor_metrics_write(&m, "\"event\":\"after close\""); /* a no-op */
    FILE *f = fopen(path, "r");
    char buf[512] = "";
    CHECK(f && fgets(buf, sizeof buf, f));
    if (f)
        fclose(f);
    cJSON *o = cJSON_Parse(buf);
    CHECKF(o && cJSON_GetArraySize(o) == 4 &&
           cJSON_GetObjectItemCaseSensitive(o, "rank")->valueint == -3 &&
           !cJSON_GetObjectItemCaseSensitive(o, "swarm"), "after a refused tag: %s", buf);
    cJSON_Delete(o);
    CHECK_ERR(rumor_metrics_open(&m, "/nonexistent-dir/m.jsonl"), RUMOR_ESYS, "metrics file");
}

int main(void)
{
    const char *base = tu_tmpdir();
    char path[300];
    snprintf(path, sizeof path, "%s/shared.jsonl", base);
    check_shared_file(path);
    snprintf(path, sizeof path, "%s/tags.jsonl", base);
    check_tags(path);
    if (!tu_failures) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", base);
    }
    return tu_finish("test_metrics");
}
