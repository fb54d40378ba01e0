#ifndef FOLIO_CLIBCURL_SHIM_H
#define FOLIO_CLIBCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt is variadic, which Swift cannot call. These typed shims fix the
   argument type per option kind: numeric options must be passed as C `long` (or curl_off_t), never as a
   Swift Int through a variadic, or libcurl reads garbage on some ABIs. */

typedef size_t (*folio_curl_data_cb)(char *buffer, size_t size, size_t count, void *context);
typedef int (*folio_curl_xferinfo_cb)(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode folio_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode folio_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode folio_curl_setopt_ptr(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode folio_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode folio_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode folio_curl_setopt_data_cb(CURL *handle, CURLoption option, folio_curl_data_cb value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode folio_curl_setopt_xferinfo_cb(CURL *handle, folio_curl_xferinfo_cb value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

/* Copies the bytes (CURL_BLOB_COPY), so the caller's buffer need not outlive the call. */
static inline CURLcode folio_curl_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob = { (void *)data, length, CURL_BLOB_COPY };
    return curl_easy_setopt(handle, option, &blob);
}

/* The CURLAUTH_* masks are cast expressions Swift does not import. */
static const unsigned long folio_curlauth_basic = CURLAUTH_BASIC;
static const unsigned long folio_curlauth_digest = CURLAUTH_DIGEST;
static const unsigned long folio_curlauth_bearer = CURLAUTH_BEARER;

#endif
