/* A CPU-bound program for the overhead table (vmmload's Figure 3): a small ray tracer
 * (spheres, one light, shadows, reflections) that renders W x H pixels and prints a
 * checksum of the image instead of the image. Usage: raytrace [W [H]] (default 320 240). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { double x, y, z; } V;
static V v(double x, double y, double z) { V r = {x, y, z}; return r; }
static V add(V a, V b) { return v(a.x + b.x, a.y + b.y, a.z + b.z); }
static V sub(V a, V b) { return v(a.x - b.x, a.y - b.y, a.z - b.z); }
static V mul(V a, double s) { return v(a.x * s, a.y * s, a.z * s); }
static double dot(V a, V b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static V norm(V a) { return mul(a, 1.0 / sqrt(dot(a, a))); }

typedef struct { V c; double r; V col; double refl; } Sphere;
static const Sphere S[] = {
    {{0, -1004, 20}, 1000, {0.6, 0.6, 0.6}, 0.2},
    {{0, 0, 20}, 4, {1.0, 0.3, 0.3}, 0.5},
    {{5, -1, 15}, 2, {0.3, 1.0, 0.3}, 0.3},
    {{-5, 0, 25}, 3, {0.3, 0.3, 1.0}, 0.4},
    {{-3, 1, 12}, 1, {1.0, 1.0, 0.3}, 0.6},
};
enum { NS = sizeof S / sizeof S[0] };

static int hit(V o, V d, double *t) {
    int best = -1;
    *t = 1e30;
    for (int i = 0; i < NS; i++) {
        V oc = sub(o, S[i].c);
        double b = dot(oc, d), c = dot(oc, oc) - S[i].r * S[i].r, h = b * b - c;
        if (h < 0) continue;
        double x = -b - sqrt(h);
        if (x > 1e-4 && x < *t) { *t = x; best = i; }
    }
    return best;
}

static V trace(V o, V d, int depth) {
    double t;
    int i = hit(o, d, &t);
    if (i < 0) return v(0.2, 0.3, 0.5);
    V p = add(o, mul(d, t)), n = norm(sub(p, S[i].c)), l = norm(sub(v(-10, 20, -10), p));
    double ts, diff = fmax(0, dot(n, l));
    if (hit(add(p, mul(n, 1e-3)), l, &ts) >= 0) diff *= 0.3;
    V col = mul(S[i].col, 0.1 + 0.9 * diff);
    if (depth < 4 && S[i].refl > 0) {
        V r = sub(d, mul(n, 2 * dot(d, n)));
        col = add(mul(col, 1 - S[i].refl), mul(trace(add(p, mul(n, 1e-3)), r, depth + 1), S[i].refl));
    }
    return col;
}

int main(int argc, char **argv) {
    int w = argc > 1 ? atoi(argv[1]) : 320, h = argc > 2 ? atoi(argv[2]) : 240;
    unsigned char *img = malloc((size_t)w * h * 3);
    if (!img || w <= 0 || h <= 0) return 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            V d = norm(v((x - w / 2.0) / h, (h / 2.0 - y) / h, 1));
            V c = trace(v(0, 0, 0), d, 0);
            unsigned char *px = img + 3 * ((size_t)y * w + x);
            px[0] = (unsigned char)(fmin(1, c.x) * 255);
            px[1] = (unsigned char)(fmin(1, c.y) * 255);
            px[2] = (unsigned char)(fmin(1, c.z) * 255);
        }
    unsigned long long hsum = 1469598103934665603ull; /* FNV-1a over the pixels */
    for (size_t i = 0; i < (size_t)w * h * 3; i++) hsum = (hsum ^ img[i]) * 1099511628211ull;
    printf("%dx%d fnv1a %016llx\n", w, h, hsum);
    free(img);
    return 0;
}
