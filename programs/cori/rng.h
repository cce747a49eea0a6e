/* A seeded generator shared by the Cori kernels (splitmix64): the inputs Rodinia reads
 * from files are generated here, so a kernel's trace depends only on its arguments. */
#ifndef CORI_RNG_H
#define CORI_RNG_H
#include <stdint.h>

static uint64_t rng_state = 1;

static inline uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline float rng_unit(void)
{
	return (float)(rng_next() >> 40) / (float)(1 << 24);
}

/* Uniform in [0, n). */
static inline uint32_t rng_below(uint32_t n)
{
	return (uint32_t)(((rng_next() >> 32) * (uint64_t)n) >> 32);
}
#endif
