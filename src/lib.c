/*
 * Thin public wrappers that validate arguments before calling into the modules.
 */
#include "sharc/sharc.h"

const char *sharc_problem_name(sharc_problem p)
{
    switch (p) {
#define X(name, str, desc)                                                                         \
    case SHARC_PROBLEM_##name:                                                                     \
        return str;
        SHARC_PROBLEM_MAP(X)
#undef X
    default:
        return "unknown";
    }
}
