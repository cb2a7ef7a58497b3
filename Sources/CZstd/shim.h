#ifndef BILLINGD_CZSTD_SHIM_H
#define BILLINGD_CZSTD_SHIM_H

// Debian's libzstd-dev: the inbox's stored bodies (BillingStore's StoredBody).
#include <zstd.h>

#endif
