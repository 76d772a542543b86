#include "base/mesh.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 2, 3))) static int mesh_error(sharc_mesh *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->error, sizeof m->error, fmt, ap);
    va_end(ap);
    return SHARC_ERR(EINVAL);
}

static int valid_axis_name(const char *s, size_t n)
{
    if (n == 0 || n >= SHARC_MESH_AXIS_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

static int axis_index(const sharc_mesh *m, const char *name, size_t n)
{
    for (int i = 0; i < m->n_axes; i++)
        if (strlen(m->names[i]) == n && memcmp(m->names[i], name, n) == 0)
            return i;
    return -1;
}

int sharc_mesh_init(sharc_mesh *m, int n_axes, const char *const *names, const int *sizes, int rank)
{
    memset(m, 0, sizeof *m);
    if (n_axes < 1 || n_axes > SHARC_MESH_MAX_AXES)
        return mesh_error(m, "mesh needs 1 to %d axes, got %d", SHARC_MESH_MAX_AXES, n_axes);
    long size = 1;
    for (int i = 0; i < n_axes; i++) {
        size_t n = names[i] ? strlen(names[i]) : 0;
        if (!valid_axis_name(names[i] ? names[i] : "", n))
            return mesh_error(m, "invalid mesh axis name '%s' (axis %d)", names[i] ? names[i] : "",
                              i);
        if (axis_index(m, names[i], n) >= 0)
            return mesh_error(m, "mesh axis '%s' appears twice", names[i]);
        if (sizes[i] < 1 || size > (1L << 30) / sizes[i])
            return mesh_error(m, "mesh axis '%s' has an invalid size %d", names[i], sizes[i]);
        memcpy(m->names[i], names[i], n + 1);
        m->sizes[i] = sizes[i];
        m->n_axes = i + 1;
        size *= sizes[i];
    }
    if (rank < 0 || rank >= size)
        return mesh_error(m, "rank %d is outside the mesh of %ld ranks", rank, size);
    m->size = (int)size;
    m->rank = rank;
    int rest = rank;
    for (int i = n_axes - 1; i >= 0; i--) {
        m->coords[i] = rest % m->sizes[i];
        rest /= m->sizes[i];
    }
    return sharc_mesh_set_broadcast_axes(m, "cp,tp");
}

int sharc_mesh_parse(sharc_mesh *m, const char *spec, int rank, int world_size)
{
    char names[SHARC_MESH_MAX_AXES][SHARC_MESH_AXIS_NAME_MAX];
    const char *name_ptrs[SHARC_MESH_MAX_AXES];
    int sizes[SHARC_MESH_MAX_AXES];
    int n = 0;
    const char *p = spec ? spec : "";
    memset(m, 0, sizeof *m);
    while (*p) {
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (!eq || eq > end)
            return mesh_error(m, "mesh spec '%s': expected name=size at item %d", spec, n + 1);
        if (n == SHARC_MESH_MAX_AXES)
            return mesh_error(m, "mesh spec '%s' has more than %d axes", spec, SHARC_MESH_MAX_AXES);
        size_t len = (size_t)(eq - p);
        if (!valid_axis_name(p, len))
            return mesh_error(m, "mesh spec '%s': invalid axis name at item %d", spec, n + 1);
        memcpy(names[n], p, len);
        names[n][len] = 0;
        char *stop = NULL;
        errno = 0;
        long v = strtol(eq + 1, &stop, 10);
        if (stop != end || eq + 1 == end || errno || v < 1 || v > (1L << 30))
            return mesh_error(m, "mesh spec '%s': invalid size at item %d", spec, n + 1);
        sizes[n] = (int)v;
        name_ptrs[n] = names[n];
        n++;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return mesh_error(m, "mesh spec '%s' ends with a comma", spec);
    }
    if (n == 0)
        return mesh_error(m, "mesh spec '%s' is empty", spec ? spec : "");
    int rc = sharc_mesh_init(m, n, name_ptrs, sizes, rank);
    if (rc < 0)
        return rc;
    if (m->size != world_size) {
        int size = m->size;
        memset(m, 0, sizeof *m);
        return mesh_error(m, "mesh '%.80s' has %d ranks but the world has %d", spec, size,
                          world_size);
    }
    return 0;
}

int sharc_mesh_set_broadcast_axes(sharc_mesh *m, const char *axes)
{
    unsigned mask = 0;
    const char *p = axes ? axes : "";
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        size_t len = (size_t)(end - p);
        if (!valid_axis_name(p, len))
            return mesh_error(m, "invalid broadcast axis list '%s'", axes);
        int i = axis_index(m, p, len);
        if (i >= 0)
            mask |= 1u << i;
        p = *end ? end + 1 : end;
    }
    m->broadcast_mask = mask;
    m->error[0] = 0;
    return 0;
}

int sharc_mesh_coord(const sharc_mesh *m, const char *axis)
{
    int i = axis ? axis_index(m, axis, strlen(axis)) : -1;
    return i < 0 ? -1 : m->coords[i];
}

/* Row-major index of the coordinates on the axes selected by `broadcast` (1) or not (0). */
static int sub_index(const sharc_mesh *m, const int *coords, int broadcast, int *extent)
{
    int index = 0, size = 1;
    for (int i = 0; i < m->n_axes; i++) {
        if (((m->broadcast_mask >> i) & 1u) != (unsigned)broadcast)
            continue;
        index = index * m->sizes[i] + coords[i];
        size *= m->sizes[i];
    }
    if (extent)
        *extent = size;
    return index;
}

int sharc_mesh_is_source(const sharc_mesh *m)
{
    return sharc_mesh_group_rank(m) == 0;
}

int sharc_mesh_dp_rank(const sharc_mesh *m)
{
    return sub_index(m, m->coords, 0, NULL);
}

int sharc_mesh_dp_size(const sharc_mesh *m)
{
    int size;
    sub_index(m, m->coords, 0, &size);
    return size;
}

int sharc_mesh_group_rank(const sharc_mesh *m)
{
    return sub_index(m, m->coords, 1, NULL);
}

int sharc_mesh_group_size(const sharc_mesh *m)
{
    int size;
    sub_index(m, m->coords, 1, &size);
    return size;
}

int sharc_mesh_group_member(const sharc_mesh *m, int group_rank)
{
    if (group_rank < 0 || group_rank >= sharc_mesh_group_size(m))
        return -1;
    int coords[SHARC_MESH_MAX_AXES];
    int rest = group_rank;
    for (int i = m->n_axes - 1; i >= 0; i--) {
        if ((m->broadcast_mask >> i) & 1u) {
            coords[i] = rest % m->sizes[i];
            rest /= m->sizes[i];
        } else {
            coords[i] = m->coords[i];
        }
    }
    int global = 0;
    for (int i = 0; i < m->n_axes; i++)
        global = global * m->sizes[i] + coords[i];
    return global;
}

int sharc_mesh_format(const sharc_mesh *m, char *buf, size_t cap)
{
    char text[SHARC_MESH_MAX_AXES * (SHARC_MESH_AXIS_NAME_MAX + 16) * 2 + 16];
    size_t n = 0;
    text[0] = 0;
    for (int i = 0; i < m->n_axes; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s=%d", i ? "," : "", m->names[i],
                              m->sizes[i]);
    n += (size_t)snprintf(text + n, sizeof text - n, " broadcast=");
    int any = 0;
    for (int i = 0; i < m->n_axes; i++)
        if ((m->broadcast_mask >> i) & 1u)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", any++ ? "," : "", m->names[i]);
    if (!any)
        snprintf(text + n, sizeof text - n, "-");
    return snprintf(buf, cap, "%s", text);
}
