#ifndef FOLIO_CLIBCURL_SHIM_H
#define FOLIO_CLIBCURL_SHIM_H
#include <curl/curl.h>
#endif
