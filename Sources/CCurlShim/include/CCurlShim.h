#ifndef OUTBOX_CCURLSHIM_H
#define OUTBOX_CCURLSHIM_H
#include <curl/curl.h>

// Swift cannot call C variadic functions; these wrap curl's variadic setters with fixed types.
CURLcode outbox_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode outbox_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value);
CURLcode outbox_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode outbox_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode outbox_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value);
CURLMcode outbox_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode outbox_multi_setopt_ptr(CURLM *multi, CURLMoption option, const void *value);
#endif
