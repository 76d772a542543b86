#include "formats/stream.h"

#include <stdio.h>
#include <string.h>

#include "io/tar.h"

int sharc__stream_open_audio_tar(sharc__tar **t, sharc__ctx *ctx, const char *path,
                                 const sharc__stream_opts *o, int (*is_audio)(const char *name))
{
    int rc = sharc__tar_open(t, ctx, path, o->max_member_bytes);
    if (rc == 0)
        sharc__tar_set_pool(*t, o->pool);
    if (rc == 0 && o->lazy_audio)
        sharc__tar_set_lazy(*t, is_audio);
    return rc;
}

void sharc__stream_error_reset(sharc__stream_error *err)
{
    err->kind = SHARC_PROBLEM_COUNT;
    err->shard_fatal = 0;
    err->path = NULL;
    sharc__buf_clear(&err->member);
    sharc__buf_clear(&err->cut_id);
}

int sharc__stream_fail(sharc__ctx *ctx, sharc__stream_error *err, int code, sharc_problem kind,
                       int shard_fatal, const char *path, const char *member, const char *cut_id)
{
    err->kind = kind;
    err->shard_fatal = shard_fatal;
    err->path = path;
    if (sharc__buf_set_str(ctx, &err->member, member) < 0 ||
        sharc__buf_set_str(ctx, &err->cut_id, cut_id) < 0) {
        /* The report loses its details but the error itself still stands. */
        sharc__buf_clear(&err->member);
        sharc__buf_clear(&err->cut_id);
    }
    /* The archive's own text names the file and member; say which cut was being read. */
    if (kind == SHARC_PROBLEM_ARCHIVE && cut_id && *cut_id && !strstr(ctx->error, cut_id)) {
        size_t n = strlen(ctx->error);
        snprintf(ctx->error + n, sizeof ctx->error - n, " (reading cut %s)", cut_id);
    }
    return code;
}

sharc_problem sharc__problem_of(int code)
{
    switch (code) {
    case SHARC_ERR_TOO_LARGE:
        return SHARC_PROBLEM_TOO_LARGE;
    case SHARC_ERR_JSON:
        return SHARC_PROBLEM_JSON;
    case SHARC_ERR_DECODE:
        return SHARC_PROBLEM_DECODE;
    case SHARC_ERR_AUDIO_MISMATCH:
        return SHARC_PROBLEM_LENGTH;
    case SHARC_ERR_MISMATCH:
        return SHARC_PROBLEM_ID_MISMATCH;
    case SHARC_ERR_FORMAT:
        return SHARC_PROBLEM_LAYOUT;
    default:
        return SHARC_PROBLEM_ARCHIVE;
    }
}
