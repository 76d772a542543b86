#include <ctype.h>
#include <string.h>

#include "base/layout.h"

const char *const sharc__audio_exts[] = {"flac", "wav", "opus", "mp3", "ogg"};
const size_t sharc__n_audio_exts = sizeof sharc__audio_exts / sizeof sharc__audio_exts[0];

const char *sharc__id_unsafe(const char *id)
{
    if (id[0] == '/')
        return "it starts with '/'";
    for (const char *part = id; part;) {
        const char *slash = strchr(part, '/');
        size_t n = slash ? (size_t)(slash - part) : strlen(part);
        if (n == 0 || (n == 1 && part[0] == '.') || (n == 2 && part[0] == '.' && part[1] == '.'))
            return "a part between its slashes is empty, '.' or '..'";
        part = slash ? slash + 1 : NULL;
    }
    return NULL;
}

int sharc__id_control_char(const char *id)
{
    for (const unsigned char *c = (const unsigned char *)id; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return *c;
    return 0;
}

/* Python's \w, for ASCII; a byte of a multi-byte UTF-8 character counts as one (most are
 * letters). */
static int word_char(unsigned char c)
{
    return isalnum(c) || c == '_' || c >= 0x80;
}

size_t sharc__nemo_sub_at(const char *path, size_t *ext_at)
{
    size_t n = strlen(path), end = n;
    const char *dot = strrchr(path, '.');
    if (dot && dot[1]) { /* an extension: a dot and word characters to the end */
        const char *q = dot + 1;
        while (*q && word_char((unsigned char)*q))
            q++;
        if (!*q)
            end = (size_t)(dot - path);
    }
    *ext_at = end;
    size_t d = end;
    while (d > 0 && isdigit((unsigned char)path[d - 1]))
        d--;
    size_t stem = d >= 4 && d < end && strncmp(path + d - 4, "-sub", 4) == 0 ? d - 4 : n;
    return stem == 0 ? n : stem; /* nothing before -subN: not a suffix */
}
