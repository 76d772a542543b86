/*
 * The shard writer's state (sharc_writer, include/sharc/writer.h). writer.c holds the
 * public calls, the checks of a cut and the output folder; writer_shard.c the files of a
 * shard: temporary names, tars, cuts files and manifests.
 */
#ifndef SHARC_SRC_WRITER_IMPL_H
#define SHARC_SRC_WRITER_IMPL_H

#include <locale.h>
#include <stdio.h>
#include <sys/stat.h>
#include <zlib.h>

#include "sharc/writer.h"
#include "base/buf.h"
#include "base/ctx.h"

/** A cut checked and ready to be written: the caller's cut and what its audio is. */
typedef struct sharc__wcut {
    const sharc_writer_cut *cut;
    sharc_writer_audio audio;
    const char *where; ///< the start of its messages: origin, or "cut '<id>'"
    struct stat st;    ///< the file when its header was read (path cuts)
} sharc__wcut;

struct sharc_writer {
    sharc__ctx ctx;
    sharc_writer_settings s;
    char *out;     ///< settings.out_dir, owned
    char *sub;     ///< NeMo: out/sharded_manifests, owned
    locale_t utf8; ///< C.UTF-8 for the member names libarchive converts; 0 when absent
    int begun, made_dir, made_sub, finished, broken, aborted;
    /* Every file written (its final path) and the temporary name it is written under until
     * finish. Files [0, n_renamed) have their final names already. */
    char **files, **tmps;
    size_t n_files, cap_files, n_renamed;
    unsigned long tmp_counter;
    /* The ids added (open addressing on their hash), each with its cut's origin or NULL. */
    char **ids, **id_origins;
    size_t ids_cap, ids_n;
    /* The open shard, when shard >= 0. */
    struct archive *tar;
    gzFile cuts; ///< Shar: the shard's cuts file
    FILE *rows;  ///< NeMo: the shard's manifest
    FILE *all;   ///< NeMo: the manifest of all shards
    int shard;
    size_t tar_file, meta_file; ///< indexes into files
    uint8_t *copy_buf;
    char *sf_log; ///< libsndfile's log of the file being checked
    sharc__buf line, meta, name;
    char where[1200];
    int json_oom; ///< a JSON text being built ran out of memory
    sharc_writer_stats stats;
};

#define SHARC__WRITER_COPY_CHUNK ((size_t)1 << 20)
#define SHARC__WRITER_SF_LOG     16384

/** Whether the cancel callback says stop: then the error is set. @return 0 or ECANCELED */
int sharc__writer_cancelled(sharc_writer *w);

/**
 * Open an audio file for reading when it is a regular file, never waiting on a FIFO; *st
 * gets its status and *out the stream. @return 0, or a negative errno after setting the
 * error ("<where>: <path>: ...")
 */
int sharc__writer_open_audio(sharc_writer *w, const char *where, const char *path, struct stat *st,
                             FILE **out);

/** Open the NeMo manifest of all shards (once, before the first shard). */
int sharc__writer_open_all(sharc_writer *w);
/** Begin shard w->shard: its tar and its cuts file or manifest. */
int sharc__writer_shard_begin(sharc_writer *w);
/** Close the open shard's files; `ok` 0 closes them after a failure, quietly. */
int sharc__writer_shard_end(sharc_writer *w, int ok);
/** Close the manifest of all shards. */
int sharc__writer_close_all(sharc_writer *w, int ok);
/** Write a checked cut into the open shard. */
int sharc__writer_shard_add(sharc_writer *w, const sharc__wcut *c);
/** Give every file its final name. */
int sharc__writer_rename_all(sharc_writer *w);
/** Remove every file written, under whichever name it has now. @return how many */
size_t sharc__writer_remove_files(sharc_writer *w);
/** Free the file lists. */
void sharc__writer_free_files(sharc_writer *w);

#endif /* SHARC_SRC_WRITER_IMPL_H */
