#ifndef FOLIO_CLIBSSH2_SHIM_H
#define FOLIO_CLIBSSH2_SHIM_H
#include <libssh2.h>
#include <libssh2_sftp.h>
#endif
