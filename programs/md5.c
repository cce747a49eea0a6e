/* A system-call-heavy program for the overhead table (vmmload's Figure 3): the MD5 (RFC
 * 1321) of a file, read with read(2) in CHUNK-byte pieces. Usage: md5 FILE [CHUNK]. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
static const int R[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                          5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                          4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                          6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};

static void block(const unsigned char *p) {
    uint32_t m[16], a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 16; i++)
        m[i] = p[4 * i] | p[4 * i + 1] << 8 | p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) f = (b & c) | (~b & d), g = i;
        else if (i < 32) f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
        else if (i < 48) f = b ^ c ^ d, g = (3 * i + 5) % 16;
        else f = c ^ (b | ~d), g = (7 * i) % 16;
        uint32_t t = d;
        d = c;
        c = b;
        uint32_t x = a + f + K[i] + m[g];
        b = b + (x << R[i] | x >> (32 - R[i]));
        a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

int main(int argc, char **argv) {
    if (argc < 2) return 64;
    size_t chunk = argc > 2 ? (size_t)atol(argv[2]) : 4096;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror(argv[1]); return 1; }
    unsigned char *buf = malloc(chunk + 64), tail[128];
    uint64_t total = 0;
    size_t have = 0; /* bytes of an incomplete block kept in tail */
    ssize_t n;
    while ((n = read(fd, buf, chunk)) > 0) {
        total += (uint64_t)n;
        size_t i = 0;
        if (have) {
            while (have < 64 && i < (size_t)n) tail[have++] = buf[i++];
            if (have < 64) continue;
            block(tail);
            have = 0;
        }
        for (; i + 64 <= (size_t)n; i += 64) block(buf + i);
        while (i < (size_t)n) tail[have++] = buf[i++];
    }
    close(fd);
    tail[have++] = 0x80;
    if (have > 56) { memset(tail + have, 0, 64 - have); block(tail); have = 0; }
    memset(tail + have, 0, 56 - have);
    uint64_t bits = total * 8;
    for (int i = 0; i < 8; i++) tail[56 + i] = (unsigned char)(bits >> (8 * i));
    block(tail);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) printf("%02x", (h[i] >> (8 * j)) & 0xff);
    printf("  %s\n", argv[1]);
    return 0;
}
