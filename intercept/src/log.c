/* log.c: stderr logging without stdio (safe from any thread, no locks). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static _Atomic int g_level = TLOG_WARN;

void tlog_set_level(int level) { atomic_store_explicit(&g_level, level, memory_order_relaxed); }

int tlog_enabled(int level) { return level <= atomic_load_explicit(&g_level, memory_order_relaxed); }

void tlog(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char buf[768];
    int n, m;
    va_list ap;

    if (level < TLOG_ERROR || level > TLOG_DEBUG || !tlog_enabled(level))
        return;
    n = snprintf(buf, sizeof buf, "tessera[%d]: %s: ", (int)getpid(), names[level]);
    if (n < 0)
        return;
    va_start(ap, fmt);
    m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += m;
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(2, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (int)w;
    }
}
