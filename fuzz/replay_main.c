/* SPDX-License-Identifier: MIT */
/* main() for the coverage builds' replay programs (cmake/coverage.cmake): a fuzz
 * target linked with gcc instead of libFuzzer, which runs the target once on
 * every file named, or on every file of every directory named (the corpora of
 * fuzz/corpus/). Exit status 0 when every input ran, 1 when a file could not be
 * read; a target that finds a fault aborts, as under libFuzzer. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    int err = ferror(f) || !buf;
    fclose(f);
    if (err) {
        fprintf(stderr, "%s: read failed\n", path);
        free(buf);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int replay(const char *path, int *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        ++*count;
        return replay_file(path);
    }
    struct dirent **names;
    int k = scandir(path, &names, NULL, alphasort);
    if (k < 0) {
        perror(path);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < k; i++) {
        if (names[i]->d_name[0] != '.') {
            size_t len = strlen(path) + strlen(names[i]->d_name) + 2;
            char *p = malloc(len);
            if (p) {
                snprintf(p, len, "%s/%s", path, names[i]->d_name);
                rc |= replay(p, count);
                free(p);
            } else {
                rc = 1;
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0, count = 0;
    for (int i = 1; i < argc; i++)
        rc |= replay(argv[i], &count);
    printf("%s: %d inputs replayed\n", argv[0], count);
    return rc;
}
