#include "folio_sys.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *folio_message(const char *format, const char *first, const char *second) {
    size_t length = strlen(format) + strlen(first) + strlen(second) + 1;
    char *message = malloc(length);
    if (message == NULL) return "out of memory";
    snprintf(message, length, format, first, second);
    return message;
}

const char *folio_load_library(const char *soname, const struct folio_symbol *symbols, size_t count) {
    /* Why lazy: libcurl brings 35 libraries whose thousands of functions Folio never calls; binding them all at
       load was 3 of 13 ms. Every function Folio calls is checked below, by dlsym, before any is used. */
    void *library = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        return folio_message("%s%s", reason != NULL ? reason : soname, reason != NULL ? "" : ": cannot be loaded");
    }
    for (size_t i = 0; i < count; i++) {
        void *address = dlsym(library, symbols[i].name);
        if (address == NULL) return folio_message("%s has no function %s (too old?)", soname, symbols[i].name);
        *symbols[i].slot = address;
    }
    return NULL;
}
