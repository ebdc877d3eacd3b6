// rng.c: the seeded PRNG (splitmix64) and its independent streams.
#include "rng.h"

static uint64_t rt_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rt_rng_seed(rt_rng *r, uint64_t seed) {
    r->state = seed;
}

uint64_t rt_rng_next(rt_rng *r) {
    r->state += 0x9e3779b97f4a7c15ULL;
    return rt_mix64(r->state);
}

uint64_t rt_rng_below(rt_rng *r, uint64_t n) {
    if (n == 0)
        return 0;
    // Reject the top partial block so every residue is equally likely.
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = rt_rng_next(r);
    while (x >= limit);
    return x % n;
}

double rt_rng_uniform(rt_rng *r) {
    return (double)(rt_rng_next(r) >> 11) * 0x1.0p-53;
}

void rt_rng_stream(rt_rng *r, uint64_t seed, uint64_t k) {
    rt_rng_seed(r, rt_mix64(seed ^ rt_mix64(k + 0x5851f42d4c957f2dULL)));
}
