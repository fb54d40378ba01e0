#include "folio_sys.h"
#include <dlfcn.h>
#include <errno.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message that lives for the process (callers keep it; one per library at most). */
static const char *folio_missing_function(const char *soname, const char *name) {
    size_t length = strlen(soname) + strlen(name) + sizeof " has no function  (too old?)";
    char *message = malloc(length);
    if (message == NULL) return "out of memory";
    snprintf(message, length, "%s has no function %s (too old?)", soname, name);
    return message;
}

const char *folio_load_library(const char *soname, const struct folio_symbol *symbols, size_t count) {
    /* Why lazy: libcurl brings 35 libraries whose thousands of functions Folio never calls; binding them all at
       load was 3 of 13 ms. Every function Folio calls is checked below, by dlsym, before any is used. */
    void *library = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        const char *copy = reason != NULL ? strdup(reason) : NULL;
        return copy != NULL ? copy : "the library cannot be loaded";
    }
    for (size_t i = 0; i < count; i++) {
        void *address = dlsym(library, symbols[i].name);
        if (address == NULL) return folio_missing_function(soname, symbols[i].name);
        *symbols[i].slot = address;
    }
    return NULL;
}

int folio_reserve_descriptor_table(int highest) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && (rlim_t)highest >= limit.rlim_cur) {
        highest = (int)limit.rlim_cur - 1;
    }
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (probe < 0) return -1;
    /* F_DUPFD takes the lowest free descriptor from `highest` up: the table grows to hold it and stays grown. */
    int high = fcntl(probe, F_DUPFD_CLOEXEC, highest);
    int saved = errno;
    close(probe);
    if (high < 0) {
        errno = saved;
        return -1;
    }
    close(high);
    return 0;
}

#include <linux/openat2.h>
#include <sys/syscall.h>

int folio_open_file_beneath(int dirfd, const char *path) {
    struct open_how how = {
        .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return fd;
    // A kernel before 5.6 (or a seccomp filter that refuses openat2): the same, one component at a time.
    char part[4096];
    int current = dirfd;
    const char *start = path;
    for (;;) {
        const char *slash = strchr(start, '/');
        if (slash == NULL) {
            int file = openat(current, start, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            int saved = errno;
            if (current != dirfd) close(current);
            errno = saved;
            return file;
        }
        size_t length = (size_t)(slash - start);
        if (length == 0 || length >= sizeof part) {
            if (current != dirfd) close(current);
            errno = length == 0 ? EINVAL : ENAMETOOLONG;
            return -1;
        }
        memcpy(part, start, length);
        part[length] = 0;
        int next = openat(current, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (current != dirfd) close(current);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        current = next;
        start = slash + 1;
    }
}
