/* Orderings of lecture 04_iccg on the graph (ptr, adj) of a symmetric matrix: Cuthill-McKee level
 * sets, wavefronts of a numbering, greedy multicoloring (MC) and cyclic multicoloring of the
 * RCM level sets (CM-RCM). The twins of course/ordering.py and src_fortran/04_iccg/ordering.f90;
 * see course/ordering.py for what each ordering is for. */
#include <stdlib.h>
#include "iccg.h"

/* [cuthill_mckee] */
void cuthill_mckee(int n, const int *restrict ptr, const int *restrict adj, int *restrict order,
                   int *restrict level)
{
    char *visited = calloc((size_t)n + 1, 1);
    if (visited == NULL)
        abort();
    int count = 0, next_level = 0;
    while (count < n) {                           /* one connected component per pass */
        int start = -1;                           /* the first unvisited node of least degree */
        for (int v = 0; v < n; v++)
            if (!visited[v] && (start < 0 || ptr[v + 1] - ptr[v] < ptr[start + 1] - ptr[start]))
                start = v;
        visited[start] = 1;
        order[count] = start;
        level[start] = next_level;
        int head = count++;
        while (head < count) {
            const int v = order[head++], first = count;
            for (int k = ptr[v]; k < ptr[v + 1]; k++) {
                const int u = adj[k], degree = ptr[u + 1] - ptr[u];
                if (visited[u])
                    continue;
                visited[u] = 1;
                level[u] = level[v] + 1;
                int pos = count++;                /* among the new ones, by increasing degree */
                while (pos > first && ptr[order[pos - 1] + 1] - ptr[order[pos - 1]] > degree) {
                    order[pos] = order[pos - 1];
                    pos--;
                }
                order[pos] = u;
            }
        }
        next_level = level[order[count - 1]] + 1;
    }
    free(visited);
}
/* [cuthill_mckee] */

/* [wavefronts] */
void wavefronts(int n, const int *restrict ptr, const int *restrict adj,
                const int *restrict order, int *restrict level)
{
    int *position = malloc(((size_t)n + 1) * sizeof *position);
    if (position == NULL)
        abort();
    for (int k = 0; k < n; k++)
        position[order[k]] = k;
    for (int k = 0; k < n; k++) {
        const int v = order[k];
        int lv = 0;
        for (int j = ptr[v]; j < ptr[v + 1]; j++)
            if (position[adj[j]] < k && level[adj[j]] + 1 > lv)
                lv = level[adj[j]] + 1;
        level[v] = lv;
    }
    free(position);
}
/* [wavefronts] */

/* [multicolor] */
int multicolor(int n, const int *restrict ptr, const int *restrict adj, int target_colors,
               int *restrict color)
{
    const int target = (int)(((long)n + target_colors - 1) / target_colors);
    int *blocked = calloc((size_t)n + 1, sizeof *blocked);   /* c + 1: a neighbour has color c */
    if (blocked == NULL)
        abort();
    for (int v = 0; v < n; v++)
        color[v] = -1;
    int left = n, ncolor = 0;
    while (left > 0) {
        int size = 0;
        for (int v = 0; v < n && size < target; v++) {
            if (color[v] >= 0 || blocked[v] == ncolor + 1)
                continue;
            color[v] = ncolor;
            size++, left--;
            for (int k = ptr[v]; k < ptr[v + 1]; k++)
                blocked[adj[k]] = ncolor + 1;
        }
        ncolor++;
    }
    free(blocked);
    return ncolor;
}
/* [multicolor] */

/* [cyclic_colors] */
int cyclic_colors(int n, const int *restrict ptr, const int *restrict adj,
                  const int *restrict order, const int *restrict level, int target_colors,
                  int *restrict color)
{
    int *held = malloc(((size_t)n + target_colors) * sizeof *held);  /* held[c] = v: taken */
    if (held == NULL)
        return -1;
    for (int c = 0; c < n + target_colors; c++)
        held[c] = -1;
    for (int v = 0; v < n; v++)
        color[v] = -1;
    int ncolor = 0;
    for (int k = 0; k < n; k++) {
        const int v = order[k];
        for (int j = ptr[v]; j < ptr[v + 1]; j++)
            if (color[adj[j]] >= 0)
                held[color[adj[j]]] = v;
        int c = -1;
        for (int t = 0; t < target_colors && c < 0; t++)
            if (held[(level[v] + t) % target_colors] != v)
                c = (level[v] + t) % target_colors;
        if (c < 0)                                /* all K held: a new color beyond K */
            for (c = target_colors; held[c] == v; c++)
                ;
        color[v] = c;
        if (c + 1 > ncolor)
            ncolor = c + 1;
    }
    free(held);
    return ncolor;
}
/* [cyclic_colors] */

void color_permutation(int n, int ncolor, const int *restrict color, const int *restrict within,
                       int *restrict perm, int *restrict color_ptr)
{
    for (int c = 0; c <= ncolor; c++)
        color_ptr[c] = 0;
    for (int v = 0; v < n; v++)
        color_ptr[color[v] + 1]++;
    for (int c = 0; c < ncolor; c++)
        color_ptr[c + 1] += color_ptr[c];
    int *next = malloc(((size_t)ncolor + 1) * sizeof *next);
    if (next == NULL)
        abort();
    for (int c = 0; c < ncolor; c++)
        next[c] = color_ptr[c];
    for (int k = 0; k < n; k++)                   /* stable: `within` order inside a color */
        perm[next[color[within[k]]]++] = within[k];
    free(next);
}
