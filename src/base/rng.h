// rng.h: the seeded pseudo-random generator every layer shares (input data, sampled lengths,
// random trees). rng.c.
#ifndef RT_RNG_H
#define RT_RNG_H

#include "rt.h"

// ---------------------------------------------------------------------------------------------
// Seeded PRNG: splitmix64 (Steele, Lea & Flood, OOPSLA 2014; the seeder of xoshiro). The state
// advances by the golden-ratio constant 0x9e3779b97f4a7c15 and each output is the state
// passed through the splitmix64 finalizer. Same seed, same stream, on every platform.
// ---------------------------------------------------------------------------------------------

typedef struct rt_rng {
    uint64_t state;
} rt_rng;

void rt_rng_seed(rt_rng *r, uint64_t seed);
uint64_t rt_rng_next(rt_rng *r);
// Uniform in [0, n) without modulo bias (rejection); n == 0 returns 0.
uint64_t rt_rng_below(rt_rng *r, uint64_t n);
// Uniform in [0, 1) with 53 random bits.
double rt_rng_uniform(rt_rng *r);
// Independent stream k of a seed: the seed and k hashed together (streams whose seeds differ by
// a multiple of the increment would overlap).
void rt_rng_stream(rt_rng *r, uint64_t seed, uint64_t k);

#endif
