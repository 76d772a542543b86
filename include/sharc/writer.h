/*
 * sharc: writing audio shards (Lhotse Shar or NeMo tarred audio) from encoded audio.
 */
#ifndef SHARC_WRITER_H
#define SHARC_WRITER_H

#include "sharc/common.h"
#include "sharc/reader.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Compression of the tars a writer writes. */
typedef enum sharc_writer_compression {
    SHARC_WRITER_COMPRESS_NONE = 0, ///< plain .tar, padded to 10240-byte records as Lhotse's
    SHARC_WRITER_COMPRESS_GZIP,     ///< .tar.gz (Lhotse reads it too)
    SHARC_WRITER_COMPRESS_ZSTD,     ///< .tar.zst (sharc reads it; Lhotse does not)
} sharc_writer_compression;

/** The largest sharc_writer_settings.cuts_per_shard. */
#define SHARC_WRITER_MAX_CUTS_PER_SHARD 100000000u

/**
 * How a writer writes. Fill it with sharc_writer_default_settings(), then change fields.
 *
 * Layouts (file names as Lhotse's SharWriter and NeMo's tarred datasets have them):
 * - SHARC_LAYOUT_SHAR: shard N is recording.NNNNNN.tar (members <id>.<ext> with the audio
 *   and <id>.json with Lhotse's recording placeholder) and cuts.NNNNNN.jsonl.gz (one
 *   MonoCut or MultiCut a line, its supervision spanning the cut with the text, language
 *   and speaker given).
 * - SHARC_LAYOUT_NEMO: shard N is audio_N.tar (members <id>.<ext>) with
 *   sharded_manifests/manifest_N.json; tarred_audio_manifest.json lists every shard's rows
 *   ({"audio_filepath", "duration", "text", "lang", "speaker", "shard_id"}).
 * Shards are numbered from 0 and hold cuts_per_shard cuts each, the last one the rest.
 */
typedef struct sharc_writer_settings {
    uint32_t struct_size; ///< sizeof(sharc_writer_settings), set by sharc_writer_default_settings
    sharc_layout layout;  ///< SHARC_LAYOUT_SHAR or SHARC_LAYOUT_NEMO (default SHAR)
    /** The folder the shards go to (required; default NULL). It must be absent (it is then
     * created, and removed again on failure) or empty. The writer copies the string. */
    const char *out_dir;
    sharc_writer_compression compression; ///< compression of the tars (default NONE); Shar
                                          ///< cuts files are always gzip'd, NeMo manifests
                                          ///< plain JSON lines
    uint32_t cuts_per_shard; ///< 1..SHARC_WRITER_MAX_CUTS_PER_SHARD (default 1000, as Lhotse)
    int zstd_threads;        ///< compression threads for ZSTD where libarchive has the option;
                             ///< 0 or 1: one (default 0)
    /** A cut's duration may differ from its audio's by this many seconds (default 0.1); the
     * audio's duration is the one written. */
    double duration_tolerance;
    /** Cap on one cut's audio, file or memory (default 64 GiB): larger is
     * SHARC_ERR_TOO_LARGE. */
    uint64_t max_audio_bytes;
    /** Check every cut and the output folder as a real run does, then write nothing: the
     * folder is not created, sharc_writer_finish() renames nothing (default 0). */
    int dry_run;
    /** Polled between chunks of audio copied and between renames; a non-zero return stops
     * the call with SHARC_ERR(ECANCELED). It may read a flag a signal handler sets (default
     * NULL: never cancelled). */
    int (*cancel)(void *cookie);
    void *cancel_cookie;       ///< passed to cancel (default NULL)
    sharc_allocator allocator; ///< default: sharc_default_allocator
    sharc_logger logger;       ///< default: sharc_default_logger (stderr, WARN)
    uint8_t reserved[64];      ///< room for later fields (common.h's rule); must be zero
} sharc_writer_settings;

/**
 * One cut to write: one whole audio file, copied byte for byte (never re-encoded). Its
 * header (libsndfile) gives the sampling rate, channels and length; WAV, FLAC, Ogg
 * Opus/Vorbis and MP3 are taken, and a WAV shorter than its header says is refused.
 */
typedef struct sharc_writer_cut {
    /** The cut id (required): unique within the writer, no control characters, not
     * starting with '/', no empty, "." or ".." part between slashes (it names the tar member
     * <id>.<ext>); for NeMo it must not end in -subN (NeMo takes "x-sub1.wav" for a part of
     * member "x.wav"). A non-ASCII id needs the C.UTF-8 locale on the system. */
    const char *id;
    /** The audio file, a regular file (a FIFO or a device is refused); NULL when the audio
     * is in `data`. A file that changes while it is copied is an error. */
    const char *path;
    const void *data; ///< the audio in memory (when path is NULL): `size` bytes
    size_t size;      ///< bytes at data
    /** The cut's duration in seconds as the caller knows it, checked against the audio's
     * within duration_tolerance; negative or NaN: not checked. */
    double duration;
    int sampling_rate;    ///< 0, or the rate the audio must have (checked)
    const char *text;     ///< the supervision's text, or NULL
    const char *speaker;  ///< the supervision's speaker, or NULL
    const char *language; ///< the supervision's language, or NULL
    /** Where the cut comes from (e.g. "train.jsonl:12"), the start of its error messages;
     * NULL: "cut '<id>'". */
    const char *origin;
} sharc_writer_cut;

/** What sharc_writer_check() found in a cut's audio. */
typedef struct sharc_writer_audio {
    int sampling_rate;
    int channels;
    int64_t frames;  ///< samples per channel
    double duration; ///< frames / sampling_rate, the duration written
    uint64_t bytes;  ///< the encoded audio's size
    char format[8];  ///< the member's extension: "wav", "flac", "opus", "ogg" or "mp3"
} sharc_writer_audio;

/** What a writer has written (or, with dry_run, checked). */
typedef struct sharc_writer_stats {
    uint64_t cuts;        ///< cuts added
    uint32_t shards;      ///< shards begun
    double audio_seconds; ///< the cuts' durations summed
    uint64_t audio_bytes; ///< the cuts' encoded audio summed
    uint64_t files;       ///< files created (temporary or final names)
    uint64_t bytes;       ///< after sharc_writer_finish(): the sizes of all files written
} sharc_writer_stats;

/** An opaque shard writer. Used by one thread at a time. */
typedef struct sharc_writer sharc_writer;

/** Fill `s` with the defaults documented on each field. Any thread may call it. */
SHARC_API void sharc_writer_default_settings(sharc_writer_settings *s);

/**
 * Create a writer. It touches no file: the output folder is checked (and created) by
 * sharc_writer_begin(), which the first sharc_writer_add() calls when the caller has not.
 * @param out  receives the writer; NULL on failure
 * @param s    settings, copied (out_dir too)
 * @return 0; SHARC_ERR(EINVAL) for NULL arguments, a struct_size other than this
 *         library's sizeof(sharc_writer_settings), reserved bytes that are not zero, no out_dir, a
 * layout other than SHAR or NEMO, an unknown compression, cuts_per_shard out of range or a negative
 * duration_tolerance (the message goes to the logger); SHARC_ERR(ENOMEM)
 */
SHARC_API int sharc_writer_open(sharc_writer **out, const sharc_writer_settings *s);

/**
 * Check and prepare the output folder: it must be empty or absent; an absent one is created
 * (and, for NeMo, its sharded_manifests/). With dry_run it is only checked. Calling it again
 * does nothing.
 * @return 0; SHARC_ERR(EEXIST) when it is not empty; another negative errno when it cannot
 *         be read or created; SHARC_ERR(EINVAL) for a NULL writer or after a failure
 */
SHARC_API int sharc_writer_begin(sharc_writer *w);

/**
 * Check a cut as sharc_writer_add() would, writing nothing and recording nothing: its id
 * against the layout's rules (not against ids already added) and its audio. The CLI checks
 * every cut this way before it writes the first. Any state but after close.
 * @param audio  receives what the audio's header says; NULL: only whether the id can name a
 *               tar member (no control character, no leading '/', no empty, "." or ".."
 *               part) is checked, not the layout's other rules nor the audio
 * @return 0; SHARC_ERR_FORMAT for an id that cannot name a tar member or audio of a format
 *         sharc does not read, with no samples, or truncated; SHARC_ERR_AUDIO_MISMATCH for a
 *         duration or sampling rate that differs from the audio's; SHARC_ERR_DECODE for
 *         audio libsndfile cannot read; SHARC_ERR_TOO_LARGE; SHARC_ERR_UNSUPPORTED for a
 *         non-ASCII id without a C.UTF-8 locale; a negative errno for a file that cannot be
 *         opened or is not a regular file (EINVAL); SHARC_ERR(EINVAL) for NULL arguments or
 *         neither path nor data. The message (sharc_writer_last_error) starts with the cut's
 *         origin, then its path.
 */
SHARC_API int sharc_writer_check(sharc_writer *w, const sharc_writer_cut *cut,
                                 sharc_writer_audio *audio);

/**
 * Check a cut (as sharc_writer_check) and write it into the current shard, beginning a new
 * shard every cuts_per_shard cuts. Files are written under hidden temporary names
 * (.NAME.PID.N.tmp) until sharc_writer_finish(). The cut's strings and data are not kept.
 * @return 0; what sharc_writer_check returns; SHARC_ERR(EEXIST) for an id already added
 *         (the message names where); SHARC_ERR_IO or a negative errno for a write that
 *         failed; SHARC_ERR(ECANCELED) when settings.cancel said so; SHARC_ERR(EINVAL) after
 *         finish or after a failed write. After an error other than those of the cut's own
 *         checks (id, audio), the writer accepts nothing more: abort or close it.
 */
SHARC_API int sharc_writer_add(sharc_writer *w, const sharc_writer_cut *cut);

/**
 * Complete the shards and give every file its final name (renames in one folder, each
 * atomic; the manifests of all shards first). On failure, the files are left for
 * sharc_writer_abort() or sharc_writer_close() to remove.
 * @return 0; SHARC_ERR(EINVAL) when no cut was added or after a failure;
 *         SHARC_ERR(ECANCELED); a negative errno or SHARC_ERR_IO for a write that failed
 */
SHARC_API int sharc_writer_finish(sharc_writer *w);

/**
 * Remove every file written, under its temporary or its final name, and the folders the
 * writer created; the writer accepts nothing more. Safe after any error and after
 * settings.cancel said stop (call it from the thread that uses the writer, not from a
 * signal handler). After sharc_writer_finish() succeeded it does nothing.
 * @return the number of files removed (0 with a NULL writer)
 */
SHARC_API size_t sharc_writer_abort(sharc_writer *w);

/**
 * Free a writer; one not finished is aborted first (its files removed). NULL-safe; sets
 * *w to NULL.
 */
SHARC_API void sharc_writer_close(sharc_writer **w);

/** Fill `out` with what the writer has written so far. */
SHARC_API void sharc_writer_get_stats(const sharc_writer *w, sharc_writer_stats *out);

/**
 * The text of the writer's last error ("" when none): it names the cut's origin, the file
 * and the member. Valid until the next call on the writer. Same thread as the writer.
 */
SHARC_API const char *sharc_writer_last_error(const sharc_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_WRITER_H */
