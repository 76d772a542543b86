#include <errno.h>
#include <string.h>

#include "sharc/common.h"
#include "sharc/version.h"

const char *sharc_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
    case SHARC_END:
        return "end of stream";
#define X(name, value, msg)                                                                        \
    case value:                                                                                    \
        return msg;
        SHARC_ERROR_MAP(X)
#undef X
    default:
        break;
    }
    if (code < 0 && code > -1000) {
        /* glibc's strerror returns a static string for known values. */
        return strerror(-code);
    }
    return "unknown error";
}

const char *sharc_err_name(int code)
{
    switch (code) {
    case 0:
        return "OK";
    case SHARC_END:
        return "SHARC_END";
#define X(name, value, msg)                                                                        \
    case value:                                                                                    \
        return "SHARC_ERR_" #name;
        SHARC_ERROR_MAP(X)
#undef X
    case -EINVAL:
        return "EINVAL";
    case -ENOMEM:
        return "ENOMEM";
    case -ENOENT:
        return "ENOENT";
    case -EIO:
        return "EIO";
    case -EACCES:
        return "EACCES";
    case -EAGAIN:
        return "EAGAIN";
    case -EOVERFLOW:
        return "EOVERFLOW";
    case -ENOSPC:
        return "ENOSPC";
    case -ENOTDIR:
        return "ENOTDIR";
    case -EISDIR:
        return "EISDIR";
    default:
        return "UNKNOWN";
    }
}

unsigned sharc_version(void)
{
    return SHARC_VERSION_NUMBER;
}

const char *sharc_version_string(void)
{
    return SHARC_VERSION_STRING;
}
