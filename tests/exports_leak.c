/*
 * A shared library that exports an internal sharc__ name by mistake, as a build with a
 * missing `static` or a stray SHARC_API would: check_exports.sh must refuse it (the test
 * exports_catch_leak expects it to fail).
 */
#include "sharc/common.h"

SHARC_API int sharc__leaked_internal(int x);

int sharc__leaked_internal(int x)
{
    return x + 1;
}

SHARC_API int sharc_exported_function(int x);

int sharc_exported_function(int x)
{
    return sharc__leaked_internal(x);
}
