/* fuzz_util.h — shared bits of the libFuzzer harnesses: write the input to a per-process
 * scratch file (the readers under test take paths), in /dev/shm when present. */
#ifndef GF_FUZZ_UTIL_H
#define GF_FUZZ_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *fuzz_scratch(const char *tag) {
    static char path[256];
    if (!path[0]) {
        const char *d = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/gf_fuzz_%s.%d", d, tag, (int)getpid());
    }
    return path;
}

static int fuzz_write(const char *path, const uint8_t *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}
#endif
