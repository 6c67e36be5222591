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

// Typed setters for callbacks and the remaining variadic calls the transport needs: a typed parameter lets the
// compiler check the Swift @convention(c) closure against curl's prototype instead of casting it to void *.
CURLcode outbox_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode outbox_easy_setopt_write_function(CURL *handle, CURLoption option, curl_write_callback callback);
CURLMcode outbox_multi_setopt_socket_function(CURLM *multi, curl_socket_callback callback);
CURLMcode outbox_multi_setopt_timer_function(CURLM *multi, curl_multi_timer_callback callback);
CURLSHcode outbox_share_setopt_long(CURLSH *share, CURLSHoption option, long value);
#endif
