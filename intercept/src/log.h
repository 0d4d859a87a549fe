/* log.h: one-line diagnostics on stderr, "tessera[pid]: level: message". */
#ifndef TESSERA_LOG_H
#define TESSERA_LOG_H

#include <stdatomic.h>

enum { TLOG_ERROR = 0, TLOG_WARN = 1, TLOG_INFO = 2, TLOG_DEBUG = 3 };

void tlog_set_level(int level);
int tlog_enabled(int level);
void tlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log at most once per process (per call site). */
#define TLOG_ONCE(level, ...)                                 \
    do {                                                      \
        static atomic_flag tlog_once_ = ATOMIC_FLAG_INIT;     \
        if (!atomic_flag_test_and_set(&tlog_once_))           \
            tlog((level), __VA_ARGS__);                       \
    } while (0)

#endif
