#ifndef BILLINGD_CCURL_SHIM_H
#define BILLINGD_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call. These typed
// wrappers are the whole shim: one per argument type billingd passes.

static inline CURLcode billingd_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode billingd_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode billingd_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode billingd_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode billingd_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*billingd_curl_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode billingd_curl_setopt_callback(CURL *handle, CURLoption option, billingd_curl_callback value) {
    return curl_easy_setopt(handle, option, value);
}

typedef int (*billingd_curl_xferinfo_callback)(void *context, curl_off_t download_total, curl_off_t download_now,
                                               curl_off_t upload_total, curl_off_t upload_now);

static inline CURLcode billingd_curl_setopt_xferinfo(CURL *handle, CURLoption option, billingd_curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode billingd_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode billingd_curl_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

#endif
