/* config.c: TESSERA_* environment parsing and validation. Bad values are
 * collected as one-line messages naming the variable and the allowed range;
 * any bad enforcement variable sets c->bad (fail closed). */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define FAIL_CLOSED "failing closed: GPU allocations and kernel launches will fail"

static void add_error(struct tessera_config *c, int fatal, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_error(struct tessera_config *c, int fatal, const char *fmt, ...)
{
    va_list ap;
    if (fatal)
        c->bad = 1;
    if (c->nerrors >= TESSERA_MAX_ERRORS)
        return;
    va_start(ap, fmt);
    vsnprintf(c->errors[c->nerrors++], sizeof c->errors[0], fmt, ap);
    va_end(ap);
}

/* One size: digits with an optional binary (Ki..Ti) or decimal (K..T)
 * suffix. Returns 0 and the byte count, or -1. */
static int parse_size(const char *s, size_t len, uint64_t *out)
{
    static const struct {
        const char *sfx;
        uint64_t mul;
    } units[] = {
        {"Ki", 1ull << 10}, {"Mi", 1ull << 20}, {"Gi", 1ull << 30}, {"Ti", 1ull << 40},
        {"K", 1000ull}, {"M", 1000000ull}, {"G", 1000000000ull}, {"T", 1000000000000ull},
    };
    uint64_t v = 0, mul = 1;
    size_t i = 0;

    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == 0)
        return -1;
    if (i < len) {
        size_t rest = len - i;
        int found = 0;
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            if (strlen(units[u].sfx) == rest && memcmp(s + i, units[u].sfx, rest) == 0) {
                mul = units[u].mul;
                found = 1;
                break;
            }
        }
        if (!found)
            return -1;
    }
    if (v > TESSERA_MAX_LIMIT / mul)
        return -1;
    v *= mul;
    if (v < 1 || v > TESSERA_MAX_LIMIT)
        return -1;
    *out = v;
    return 0;
}

static void parse_limit(struct tessera_config *c, const char *v)
{
    uint64_t vals[TESSERA_MAX_DEV];
    int n = 0;
    const char *p = v;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == TESSERA_MAX_DEV || parse_size(p, len, &vals[n]) != 0)
            goto bad;
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    c->mem_limited = 1;
    for (int d = 0; d < TESSERA_MAX_DEV; d++)
        c->limit[d] = n == 1 ? vals[0] : (d < n ? vals[d] : 0);
    return;
bad:
    add_error(c, 1,
              "invalid TESSERA_MEMORY_LIMIT=\"%.64s\": want a size in bytes from 1 to %llu "
              "with an optional Ki, Mi, Gi, Ti, K, M, G or T suffix, or a comma list of up to "
              "%d such sizes (one per visible device); " FAIL_CLOSED,
              v, (unsigned long long)TESSERA_MAX_LIMIT, TESSERA_MAX_DEV);
}

static int valid_container_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!alnum && !(i > 0 && (ch == '_' || ch == '.' || ch == '-')))
            return 0;
    }
    return 1;
}

static void parse_path(struct tessera_config *c, const char *name, const char *v, char *dst)
{
    size_t n = strlen(v);
    if (v[0] != '/' || n >= TESSERA_PATH_MAX) {
        add_error(c, 1,
                  "invalid %s=\"%.64s\": want an absolute path shorter than %d bytes; "
                  FAIL_CLOSED,
                  name, v, TESSERA_PATH_MAX);
        return;
    }
    memcpy(dst, v, n + 1);
}

void tessera_config_parse(struct tessera_config *c, const char *(*get)(const char *))
{
    const char *v;

    memset(c, 0, sizeof *c);
    c->log_level = TLOG_WARN;
    strcpy(c->shm_dir, "/dev/shm");

    if ((v = get("TESSERA_LOG_LEVEL")) != NULL) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        int lvl = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(v, names[i]) == 0)
                lvl = i;
        if (lvl < 0)
            add_error(c, 0, "invalid TESSERA_LOG_LEVEL=\"%.64s\": want error, warn, info or debug; "
                            "using warn", v);
        else
            c->log_level = lvl;
    }
    if ((v = get("TESSERA_MEMORY_LIMIT")) != NULL)
        parse_limit(c, v);
    if ((v = get("TESSERA_CONTAINER_ID")) != NULL) {
        if (valid_container_id(v))
            strcpy(c->container_id, v);
        else
            add_error(c, 1,
                      "invalid TESSERA_CONTAINER_ID=\"%.64s\": want 1 to 128 characters from "
                      "[A-Za-z0-9_.-] starting with a letter or digit; " FAIL_CLOSED, v);
    } else if (get("TESSERA_MEMORY_LIMIT") != NULL) {
        add_error(c, 1, "TESSERA_CONTAINER_ID is not set but TESSERA_MEMORY_LIMIT is: the limit "
                        "is shared by the container's processes through a file named by the "
                        "container id; " FAIL_CLOSED);
    }
    if ((v = get("TESSERA_SHM_DIR")) != NULL)
        parse_path(c, "TESSERA_SHM_DIR", v, c->shm_dir);
    if ((v = get("TESSERA_ARBITER_REGION")) != NULL) {
        c->region_set = 1;
        parse_path(c, "TESSERA_ARBITER_REGION", v, c->region_path);
    }
    if ((v = get("TESSERA_OVERSUBSCRIBE")) != NULL) {
        if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
            c->oversubscribe = 1;
        else if (strcmp(v, "0") != 0 && strcmp(v, "false") != 0)
            add_error(c, 1, "invalid TESSERA_OVERSUBSCRIBE=\"%.64s\": want 1, true, 0 or false; "
                            FAIL_CLOSED, v);
    }
    if ((v = get("TESSERA_COMPUTE_FAIL")) != NULL) {
        if (strcmp(v, "closed") == 0)
            c->compute_fail_closed = 1;
        else if (strcmp(v, "open") != 0)
            add_error(c, 1, "invalid TESSERA_COMPUTE_FAIL=\"%.64s\": want open or closed; "
                            FAIL_CLOSED, v);
    }
}

static struct tessera_config g_cfg;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_report_once = PTHREAD_ONCE_INIT;

static const char *env_get(const char *name) { return getenv(name); }

static void cfg_init(void)
{
    tessera_config_parse(&g_cfg, env_get);
    tlog_set_level(g_cfg.log_level);
}

const struct tessera_config *tessera_cfg(void)
{
    pthread_once(&g_cfg_once, cfg_init);
    return &g_cfg;
}

static void report(void)
{
    const struct tessera_config *c = tessera_cfg();
    for (int i = 0; i < c->nerrors; i++)
        tlog(TLOG_ERROR, "%s", c->errors[i]);
}

void tessera_config_report(void) { pthread_once(&g_report_once, report); }
