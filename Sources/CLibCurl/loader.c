/* Loads libcurl on first use and forwards Folio's libcurl calls to it (see CLibCurl.h for why). */
#define CURL_DISABLE_TYPECHECK
#include "folio_sys.h"

/* Why hidden: these forwarders carry libcurl's own names so that Swift calls the usual API; hidden keeps them
   out of Folio's dynamic symbol table (the Swift driver exports the executable's symbols), so libcurl's calls to
   its own functions still bind inside libcurl, never back to these. */
#pragma GCC visibility push(hidden)
#include "CLibCurl.h"

#define FOLIO_CURL_FUNCTIONS(X) \
    X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_reset) X(curl_easy_perform) \
    X(curl_easy_setopt) X(curl_easy_strerror) X(curl_slist_append) X(curl_slist_free_all) X(curl_multi_init) \
    X(curl_multi_cleanup) X(curl_multi_add_handle) X(curl_multi_remove_handle) X(curl_multi_perform) \
    X(curl_multi_poll) X(curl_multi_info_read) X(curl_multi_strerror) X(curl_easy_getinfo) X(curl_multi_setopt)

FOLIO_DEFINE_LOADER(folio_curl_load, "libcurl.so.4", FOLIO_CURL_FUNCTIONS)

CURLcode curl_global_init(long flags) { return loaded_curl_global_init(flags); }
CURL *curl_easy_init(void) { return loaded_curl_easy_init(); }
void curl_easy_cleanup(CURL *handle) { loaded_curl_easy_cleanup(handle); }
void curl_easy_reset(CURL *handle) { loaded_curl_easy_reset(handle); }
CURLcode curl_easy_perform(CURL *handle) { return loaded_curl_easy_perform(handle); }
const char *curl_easy_strerror(CURLcode code) { return loaded_curl_easy_strerror(code); }
struct curl_slist *curl_slist_append(struct curl_slist *list, const char *string) { return loaded_curl_slist_append(list, string); }
void curl_slist_free_all(struct curl_slist *list) { loaded_curl_slist_free_all(list); }
CURLM *curl_multi_init(void) { return loaded_curl_multi_init(); }
CURLMcode curl_multi_cleanup(CURLM *multi) { return loaded_curl_multi_cleanup(multi); }
CURLMcode curl_multi_add_handle(CURLM *multi, CURL *handle) { return loaded_curl_multi_add_handle(multi, handle); }
CURLMcode curl_multi_remove_handle(CURLM *multi, CURL *handle) { return loaded_curl_multi_remove_handle(multi, handle); }
CURLMcode curl_multi_perform(CURLM *multi, int *running) { return loaded_curl_multi_perform(multi, running); }
CURLMcode curl_multi_poll(CURLM *multi, struct curl_waitfd extra[], unsigned int count, int timeout, int *ready) {
    return loaded_curl_multi_poll(multi, extra, count, timeout, ready);
}
CURLMsg *curl_multi_info_read(CURLM *multi, int *queued) { return loaded_curl_multi_info_read(multi, queued); }
const char *curl_multi_strerror(CURLMcode code) { return loaded_curl_multi_strerror(code); }

CURLcode folio_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return loaded_curl_easy_setopt(handle, option, value);
}
CURLcode folio_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return loaded_curl_easy_setopt(handle, option, value);
}
CURLcode folio_curl_setopt_ptr(CURL *handle, CURLoption option, void *value) {
    return loaded_curl_easy_setopt(handle, option, value);
}
CURLcode folio_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return loaded_curl_easy_setopt(handle, option, value);
}
CURLcode folio_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return loaded_curl_easy_setopt(handle, option, value);
}
CURLcode folio_curl_setopt_data_cb(CURL *handle, CURLoption option, folio_curl_data_cb value) {
    return loaded_curl_easy_setopt(handle, option, value);
}
CURLcode folio_curl_setopt_xferinfo_cb(CURL *handle, folio_curl_xferinfo_cb value) {
    return loaded_curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}
CURLcode folio_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return loaded_curl_easy_getinfo(handle, info, value);
}
CURLcode folio_curl_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value) {
    return loaded_curl_easy_getinfo(handle, info, value);
}
CURLcode folio_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return loaded_curl_easy_getinfo(handle, info, value);
}
CURLMcode folio_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return loaded_curl_multi_setopt(multi, option, value);
}
CURLcode folio_curl_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob = {(void *)data, length, CURL_BLOB_COPY};
    return loaded_curl_easy_setopt(handle, option, &blob);
}
