/*
 * Rules of the shard layouts that the readers (shar.c, nemo.c, wds.c, dataset.c) and the
 * writer (writer.c) must agree on: file and member names, audio member extensions and
 * which cut ids can name a tar member.
 */
#ifndef SHARC_SRC_LAYOUT_H
#define SHARC_SRC_LAYOUT_H

#include <stddef.h>

/* Lhotse Shar: shard N's cuts and recordings (printf formats taking N). */
#define SHARC__SHAR_CUTS_FMT      "cuts.%06d.jsonl.gz"
#define SHARC__SHAR_RECORDING_FMT "recording.%06d.tar"
/* NeMo tarred audio: shard N's tar, its manifest (under SHARC__NEMO_SHARDED_DIR) and the
 * manifest of all shards. */
#define SHARC__NEMO_AUDIO_FMT          "audio_%d.tar"
#define SHARC__NEMO_SHARDED_DIR        "sharded_manifests"
#define SHARC__NEMO_SHARD_MANIFEST_FMT "manifest_%d.json"
#define SHARC__NEMO_ALL_MANIFEST       "tarred_audio_manifest.json"

/** The extensions of audio members the readers decode (webdataset's names for them). */
extern const char *const sharc__audio_exts[];
extern const size_t sharc__n_audio_exts;

/**
 * Why `id` cannot name tar members ("<id>.<ext>", which tar unpacks as a relative path), or
 * NULL when it can: it starts with '/', or a part between its slashes is empty, "." or "..".
 * Control characters are checked apart (sharc__id_control_char), so that a message can
 * name the character without printing it.
 */
const char *sharc__id_unsafe(const char *id);

/** The first control character (below 0x20, or 0x7f) of `id`, or 0 when it has none. */
int sharc__id_control_char(const char *id);

/**
 * Where a NeMo "-subN" suffix starts in `path` (before an extension of word characters, as
 * NeMo's regular expression ^(?P<stem>.+)(?P<sub>-sub\d+)(?P<ext>\.\w+)?$ finds it), or
 * strlen(path) when it has none. *ext_at gets where the extension starts (strlen(path)
 * without one). NeMo's reader takes a row "x-sub1.wav" for a part of member "x.wav".
 */
size_t sharc__nemo_sub_at(const char *path, size_t *ext_at);

#endif /* SHARC_SRC_LAYOUT_H */
