#ifndef FOLIO_CLIBCURL_H
#define FOLIO_CLIBCURL_H
#include <curl/curl.h>

/* libcurl is loaded with dlopen the first time an HTTP source needs it, not linked: it pulls in 35 shared
   libraries (GnuTLS, Kerberos, LDAP, p11-kit...) whose loading and constructors cost every Folio process ~9 ms
   and ~7 MB, also runs that never speak HTTP. loader.c defines each libcurl function Folio calls as a hidden
   forwarder to the loaded library, so Swift calls the usual names.

   Loads libcurl.so.4 once; returns NULL when every function Folio uses is there, else what went wrong (the
   dlerror text or the missing function). No libcurl function may be called before it returned NULL. */
const char *folio_curl_load(void);

/* curl_easy_setopt is variadic, which Swift cannot call. These typed functions fix the argument type per option
   kind: numeric options must be passed as C `long` (or curl_off_t), never as a Swift Int through a variadic, or
   libcurl reads garbage on some ABIs. */

typedef size_t (*folio_curl_data_cb)(char *buffer, size_t size, size_t count, void *context);
typedef int (*folio_curl_xferinfo_cb)(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);

CURLcode folio_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode folio_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode folio_curl_setopt_ptr(CURL *handle, CURLoption option, void *value);
CURLcode folio_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode folio_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode folio_curl_setopt_data_cb(CURL *handle, CURLoption option, folio_curl_data_cb value);
CURLcode folio_curl_setopt_xferinfo_cb(CURL *handle, folio_curl_xferinfo_cb value);
/* Copies the bytes (CURL_BLOB_COPY), so the caller's buffer need not outlive the call. */
CURLcode folio_curl_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length);

/* curl_easy_getinfo is variadic too: this one reads the options whose value is a curl_off_t (the *_TIME_T
   timings, in microseconds). */
CURLcode folio_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);
/* And this one the options whose value is a socket (CURLINFO_ACTIVESOCKET). */
CURLcode folio_curl_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value);
/* And this one those whose value is a long (CURLINFO_HTTP_VERSION). */
CURLcode folio_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);

/* curl_multi_setopt is variadic as well: this one sets the multi options whose value is a long. */
CURLMcode folio_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/* The CURLAUTH_* masks are cast expressions Swift does not import. */
static const unsigned long folio_curlauth_basic = CURLAUTH_BASIC;
static const unsigned long folio_curlauth_digest = CURLAUTH_DIGEST;
static const unsigned long folio_curlauth_bearer = CURLAUTH_BEARER;

#endif
