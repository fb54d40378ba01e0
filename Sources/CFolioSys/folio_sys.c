#include "folio_sys.h"
#include <dlfcn.h>
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
